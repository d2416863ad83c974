// The network layer: backends that move bytes between hosts, behind one
// interface in the shape of NCCL's net plugin (include/plugin/nccl_net.h):
// devices (NICs) with properties; a connection made through a handle that
// the receiver makes (listen), the two ranks exchange over the bootstrap, and
// both sides finish without blocking (connect, accept); isend, irecv and test.
// ACCL's own TCP backend (net/socket_net.cc) and external plugins
// (net/plugin.cc) are both a NetBackend; the net transport
// (transport/net.cc) uses whichever netBackend() chose.
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl.h"

namespace accl {

constexpr size_t kNetHandleBytes = 128;  // NCCL_NET_HANDLE_MAXSIZE

struct NetDeviceProps {
  std::string name;     // an interface, or the plugin's device name
  std::string pciPath;  // in /sys ("" where unknown)
  uint64_t guid = 0;
  int ptrSupport = 1;   // NCCL_PTR_HOST | NCCL_PTR_CUDA | ...
  int speedMbps = 0;    // 0: unknown
  int port = 0;
  float latencyUs = 0;
  int maxComms = 0;
  int maxRecvs = 1;
  int rail = -1;        // the rail and plane it is on (-1: unknown; a v12 plugin may say)
  int plane = -1;
  std::string subnet;   // an interface's: "10.64.3.0/24" (topo/ pairs NICs of one subnet across hosts)
};

class NetBackend {
 public:
  virtual ~NetBackend() = default;
  virtual const char* name() const = 0;
  // The plugin interface version it came through (0: ACCL's own).
  virtual int version() const = 0;
  // Physical devices: 0 to devices()-1. Merged ones (makeVDevice) come after.
  virtual int devices() = 0;
  virtual ncclResult_t properties(int dev, NetDeviceProps* out) = 0;
  // A device that carries each connection over all of devs (up to
  // maxVDeviceNics(): ACCL's sockets 16, or 4 where any interface is IPv6; a
  // plugin 4, or 8 for v12, as NCCL merges a NIC's ports); the same set
  // gives the same device. A backend that cannot merge says so
  // (ncclInvalidUsage), without a WARN.
  virtual ncclResult_t makeVDevice(const int* devs, int n, int* vdev) { return ncclInvalidUsage; }
  // As makeVDevice, where devs[active, n) stand by: a connection carries
  // over them only while each of devs[0, active) is given up (failover).
  // A backend without standby merges devs[0, active) alone.
  virtual ncclResult_t makeVDeviceWithStandby(const int* devs, int n, int active, int* vdev) {
    if (active != 1) return makeVDevice(devs, active, vdev);
    *vdev = devs[0];  // one: the device itself
    return ncclSuccess;
  }
  // The most devices makeVDevice merges (1: it cannot).
  virtual int maxVDeviceNics() const { return 1; }
  // The receiver's side: fills `handle` (kNetHandleBytes) for the sender.
  // `secret` (the communicator's, 32 bytes) is what a backend that can
  // authenticates its connections with; plugins ignore it.
  virtual ncclResult_t listen(int dev, const uint8_t* secret, void* handle, void** listenComm) = 0;
  // Neither blocks: *comm stays null until the connection is there, and the
  // caller calls again. The sender's progress is in *progress (null at
  // first; the backend's) or, for plugins, in its copy of the handle; a
  // connect given up on hands *progress to cancelConnect.
  virtual ncclResult_t connect(int dev, const uint8_t* secret, void* handle, void** progress, void** sendComm) = 0;
  virtual void cancelConnect(void* progress) {}
  virtual ncclResult_t accept(void* listenComm, void** recvComm) = 0;
  virtual ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
  virtual ncclResult_t deregMr(void* comm, void* mhandle) = 0;
  // Requests complete in the order they were made on a comm; either may give
  // no request (*request null) where it would block: call again later.
  virtual ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) = 0;
  virtual ncclResult_t irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) = 0;
  // Moves the request on; *done once it is complete (the request is then
  // gone), with the bytes it moved in *size. An error: the connection broke.
  virtual ncclResult_t test(void* request, int* done, size_t* size) = 0;
  // Moves a send comm that has no request outstanding: a backend that may
  // still have to send bytes again (ACCL's TCP backend watching its lanes
  // for failover) does so here, and says ncclInProgress while it holds
  // bytes its peer has not acknowledged. An error: the connection broke.
  virtual ncclResult_t progress(void* sendComm) { return ncclSuccess; }
  virtual ncclResult_t closeSend(void* sendComm) = 0;
  virtual ncclResult_t closeRecv(void* recvComm) = 0;
  virtual ncclResult_t closeListen(void* listenComm) = 0;
  // Whether a send's memory is read only within isend and test, on the
  // caller's thread (so a message given up on is never read again); a
  // backend with threads of its own (plugins, ACCL's with helpers) may read
  // it any time until the request completes.
  virtual bool readsSendsOnlyInCalls() const { return false; }
  // The descriptors (at most max, with their events) that a proxy may sleep
  // on until the comm can move; -1 where the backend has none (plugins).
  virtual int pollFds(void* comm, pollfd* fds, int max) const { return -1; }
};

// The backend of this process, chosen at the first call: an external plugin
// where NCCL_NET_PLUGIN names one that loads, else ACCL's TCP backend
// ("Socket"); NCCL_NET, where set, must name the one chosen. Null, with a
// WARN, where NCCL_NET names none that is there.
NetBackend* netBackend();
// The backend named `name` (case-insensitive: a loaded plugin's, or "Socket"),
// as ncclConfig_t.netName asks; null where none has that name, with the
// names there are in *available.
NetBackend* netBackendNamed(const char* name, std::string* available);
// ACCL's own TCP backend (also where a plugin is loaded: the tests use it).
NetBackend* socketBackend();

}  // namespace accl
