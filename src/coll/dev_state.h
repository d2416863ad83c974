// A device-mode communicator's CUDA state and the helpers its launches share
// (coll/dev_coll.cc: kernels over device connectors; coll/dev_staged.cc: device
// buffers between hosts, staged through pinned host memory). Only built with the
// CUDA executor (ACCL_HAVE_DEVICE_PATH).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/check.h"
#include "coll/dev_comm.h"
#include "coll/dev_share.h"
#include "core/comm.h"
#include "device/dev_types.h"
#include "transport/connection.h"

namespace accl {

class Stager;  // coll/dev_staged.cc
struct StagerDeleter {
  void operator()(Stager* s) const;
};

struct DevState {
  int nChannels = 1;    // per connector, agreed by all ranks
  bool netRing = false;  // ranks on several hosts: the ring's collectives run in kernels (ACCL_NET_KERNELS)
  int p2pChannels = 1;  // most channels of one send or receive
  // By peer: a rank of this process on this GPU, so large sends and receives
  // with it copy between the two buffers (coll/dev_coll.cc, devRunP2p).
  std::vector<bool> p2pDirect;
  int smCount = 1;
  DevStatus* status = nullptr;  // host-mapped
  DevStatus* statusDev = nullptr;
  cudaEvent_t lastEvent = nullptr;
  cudaEvent_t joinEvent = nullptr;  // orders the streams of a group's one launch (coll/dev_coll.cc enqueueTogether)
  cudaStream_t lastStream = nullptr;
  bool haveLast = false;
  bool reported = false;
  bool toldGroupLaunch = false;  // the INFO line of devRunTogether, once
  // watchPeers (coll/dev_coll.cc): whether any rank of this host is in
  // another process, one thread looking at a time, when it last looked, and
  // why each rank found gone is (peerGone's words; nullptr: not found gone).
  bool watchesPeers = false;
  std::mutex peerCheckMu;
  std::atomic<uint64_t> lastPeerCheckMs{0};
  uint64_t peerCheckMs = 100;  // ACCL_PEER_CHECK_MS
  std::unique_ptr<std::atomic<const char*>[]> peersGone;
  // The watch's own thread (where watchesPeers), which looks every
  // peerCheckMs until devStop: an application that only waits on its stream
  // (cudaStreamSynchronize) neither polls nor calls.
  std::thread watcher;
  std::mutex watcherMu;
  std::condition_variable watcherWake;
  bool watcherStop = false;
  Connection* ringSend = nullptr;
  Connection* ringRecv = nullptr;
  // All ranks on this GPU: the blocks each rank's direct collectives may run
  // at once (0: no direct collectives), and, when all are in this process, the
  // slot table they share (coll/dev_direct.cc); when they are in several, the
  // slots and registrations they share through CUDA IPC (coll/dev_share.h).
  int directBlocks = 0;
  DevDirectSlot* direct = nullptr;
  DevSharePtr share;
  // Between hosts: the bytes per chunk of a staged collective (0: each whole),
  // as every rank agreed, and the proxy that runs staged operations (made on first use).
  int64_t stageChunk = 0;
  std::unique_ptr<Stager, StagerDeleter> stager;
};

// Direct collectives (coll/dev_direct.cc): at setup, when every rank is on
// this GPU (and ACCL_DIRECT allows), the blocks per rank, and the shared table
// when they are all in this process; released with the device state.
ncclResult_t devDirectSetup(ncclComm* comm);
void devDirectRelease(ncclComm* comm);

// Writes `bytes` at `dst` (device memory) from `src` (host memory; NULL:
// zeroes) on a stream of its own, and waits for it: not on the legacy stream,
// which does not order non-blocking streams, and not on the whole device,
// where other ranks of this process may have kernels waiting for this one.
ncclResult_t devWriteSync(ncclComm* comm, void* dst, const void* src, size_t bytes, const char* what);

// ncclSuccess, or a WARN naming the call and ncclUnhandledCudaError.
ncclResult_t cudaCheck(cudaError_t e, const char* what, const ncclComm* comm);
#define CUDACHECK(call, what, comm) NCCLCHECK(::accl::cudaCheck((call), (what), (comm)))

// What every launch of this communicator carries: rank, status word, deadline.
DevCtx ctxOf(ncclComm* comm);
// The stream is being captured into a CUDA graph.
bool capturing(cudaStream_t s);
// A driver API function of CUDA 12's ABI (the runtime is linked statically;
// no libcuda at link time), or null where the driver lacks it.
void* driverFunction(const char* symbol);

// Makes `s` wait for the communicator's previous work where that went on
// another stream (a captured stream follows its graph's order instead).
inline ncclResult_t afterPrevious(ncclComm* comm, cudaStream_t s) {
  DevState& d = *comm->dev;
  if (!capturing(s) && d.haveLast && d.lastStream != s)
    CUDACHECK(cudaStreamWaitEvent(s, d.lastEvent, 0), "cudaStreamWaitEvent", comm);
  return ncclSuccess;
}

// Enqueues `launch` (any stream work; returns cudaError_t) on `s` after the
// communicator's previous work, and records it as the latest: also when it
// failed part-way, since what it did enqueue must stay ordered before the
// next call (and the communicator's memory kept until it ran).
template <typename Launch>
ncclResult_t ordered(ncclComm* comm, cudaStream_t s, const char* opName, Launch launch) {
  DevState& d = *comm->dev;
  const bool cap = capturing(s);
  NCCLCHECK(afterPrevious(comm, s));
  (void)cudaGetLastError();  // a launch reports cudaGetLastError(): not an earlier call's error
  cudaError_t e = launch();
  if (e != cudaSuccess) (void)cudaGetLastError();
  if (!cap) {
    cudaError_t r = cudaEventRecord(d.lastEvent, s);
    if (r == cudaSuccess) {
      d.lastStream = s;
      d.haveLast = true;
    } else if (e == cudaSuccess) {
      e = r;
    }
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    WARN("%s (%s, rank %d): enqueueing the operation on its stream failed: %s", opName, comm->name.c_str(),
         comm->rank, cudaGetErrorString(e));
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

}  // namespace accl
