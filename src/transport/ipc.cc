// Device connectors between ranks of one host (device mode). The receiver
// allocates the data slots and the sender's counters (DevCounters: tail and
// byte counts) of every channel in one allocation of its GPU memory and
// exports it with CUDA IPC, so it polls tail in its own GPU memory. The
// control blocks (FifoCtrl, one per channel: head, which the sender polls,
// the abort flag and the failed rank) live in a POSIX shm segment registered
// with CUDA, which outlives either process, so host code on either side can
// abort a kernel that waits. The segment's first page carries the IPC
// handle, set up through connect.cc's handshake.
#ifdef ACCL_HAVE_DEVICE_PATH
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <new>

#include "base/check.h"
#include "bootstrap/socket.h"
#include "core/comm.h"
#include "device/dev_types.h"
#include "transport/connection.h"
#include "transport/dev_mem.h"
#include "transport/transport.h"

namespace accl {
namespace {

static_assert(sizeof(DevFifoCtrl) <= sizeof(FifoCtrl), "DevFifoCtrl mirrors FifoCtrl");
static_assert(offsetof(DevFifoCtrl, head) == 64 && offsetof(DevFifoCtrl, abort) == 128,
              "DevFifoCtrl mirrors FifoCtrl");
static_assert(offsetof(DevFifoCtrl, bytes) == offsetof(FifoCtrl, bytes), "DevFifoCtrl mirrors FifoCtrl");

constexpr size_t kCtrlStride = 256;
static_assert(sizeof(FifoCtrl) <= kCtrlStride, "a channel's control block");
size_t segmentBytes(int nChannels) { return (4096 + nChannels * kCtrlStride + 4095) & ~size_t(4095); }

constexpr uint64_t kIpcMagic = 0x6370692d6c636361ull;  // "accl-ipc"

struct IpcHeader {
  uint64_t magic;
  cudaIpcMemHandle_t handle;
  void* slots;  // the receiver's pointer, used directly by a sender in the same process
  int32_t pid;
  int32_t cudaDev;
  int32_t nChannels;
  uint64_t slotBytes;
};

class IpcConnection : public Connection {
 public:
  IpcConnection(ncclComm* comm, int peerRank, bool send)
      : nChannels_(comm->devChannels), crossGpu_(comm->peers[peerRank].devKey != comm->peers[comm->rank].devKey) {
    isSend = send;
    peer = peerRank;
    kind = "cuda-ipc";
    device = true;
    bytes_ = segmentBytes(nChannels_);
  }
  ~IpcConnection() override {
    // Runs after every kernel that used the connector has left (abort reaches them
    // through the control blocks); cudaFree waits for the device anyway.
    devTableFree(table_);
    if (slots_) {
      if (!isSend) (void)cudaFree(slots_);
      else if (imported_) (void)cudaIpcCloseMemHandle(slots_);
    }
    if (registered_) (void)cudaHostUnregister(map_);
    if (map_) munmap(map_, bytes_);
    if (!name_.empty()) shm_unlink(name_.c_str());
    (void)cudaGetLastError();
  }
  void abort(int failedRank) override {
    for (int c = 0; map_ && c < nChannels_; ++c) {
      fifoAbort(ctrlOf(c), failedRank);
    }
  }
  DevChan* devTable() const override { return table_; }
  FifoCtrl* ctrlOf(int c) const { return reinterpret_cast<FifoCtrl*>(static_cast<char*>(map_) + 4096 + c * kCtrlStride); }
  size_t slotsBytes() const { return static_cast<size_t>(nChannels_) * kSlots * slotBytes_; }
  // The slots, then every channel's counters.
  size_t allocBytes() const { return slotsBytes() + static_cast<size_t>(nChannels_) * sizeof(DevCounters); }
  IpcHeader* header() const { return static_cast<IpcHeader*>(map_); }

  // Maps the control blocks for kernels and writes the per-channel table.
  ncclResult_t finish(ncclComm* comm) {
    if (!devCudaOk(cudaHostRegister(map_, bytes_, cudaHostRegisterMapped | cudaHostRegisterPortable),
                "cudaHostRegister of the control blocks", comm, peer))
      return ncclUnhandledCudaError;
    registered_ = true;
    void* devMap = nullptr;
    if (!devCudaOk(cudaHostGetDevicePointer(&devMap, map_, 0), "cudaHostGetDevicePointer", comm, peer))
      return ncclUnhandledCudaError;
    std::vector<DevChan> chans(nChannels_);
    for (int c = 0; c < nChannels_; ++c) {
      chans[c].slots = static_cast<char*>(slots_) + static_cast<size_t>(c) * kSlots * slotBytes_;
      chans[c].cnt = reinterpret_cast<DevCounters*>(static_cast<char*>(slots_) + slotsBytes()) + c;
      chans[c].ctrl = reinterpret_cast<DevFifoCtrl*>(static_cast<char*>(devMap) + 4096 + c * kCtrlStride);
      chans[c].step = 0;
      chans[c].seen = 0;
      chans[c].slotBytes = slotBytes_;
      chans[c].crossGpu = crossGpu_;
    }
    // The receiver's counters start at 0 (the sender finds them so: it
    // connects once this returned).
    NCCLCHECK(devTableMake(comm, peer, chans, isSend ? nullptr : static_cast<char*>(slots_) + slotsBytes(),
                           allocBytes() - slotsBytes(), &table_));
    fifo.ctrl = ctrlOf(0);  // what host-side checks look at
    fifo.slotBytes = slotBytes_;
    return ncclSuccess;
  }

  void* map_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;  // receiver, until the sender has mapped it
  void* slots_ = nullptr;
  bool imported_ = false;
  bool registered_ = false;
  DevChan* table_ = nullptr;
  int nChannels_ = 0;
  bool crossGpu_;  // the peer uses another GPU
  size_t slotBytes_ = 0;
};


}  // namespace

static ncclResult_t ipcCreateRecv(ncclComm* comm, int peer, int tag, ConnPtr* out) {
  auto c = std::make_unique<IpcConnection>(comm, peer, false);
  c->slotBytes_ = comm->slotBytes;
  c->name_ = shmSegmentName(comm, peer, comm->rank, tag);
  NCCLCHECK(shmSegmentCreate(comm, "the control of its device FIFO from rank " + std::to_string(peer), c->name_, c->bytes_,
                             &c->map_));
  for (int ch = 0; ch < c->nChannels_; ++ch) {
    FifoCtrl* ctrl = new (c->ctrlOf(ch)) FifoCtrl();
    ctrl->tail.store(0);
    ctrl->head.store(0);
    ctrl->abort.store(0);
    ctrl->peerGone.store(0);
    ctrl->failedRank.store(-1);
    ctrl->receiverPid = getpid();
    ctrl->senderPid = localPid(comm, peer);
  }
  if (!devCudaOk(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm, peer) ||
      !devCudaOk(cudaMalloc(&c->slots_, c->allocBytes()), "cudaMalloc (FIFO slots)", comm, peer))
    return ncclUnhandledCudaError;
  comm->gpuBytes += c->allocBytes();
  IpcHeader* h = c->header();
  if (!devCudaOk(cudaIpcGetMemHandle(&h->handle, c->slots_), "cudaIpcGetMemHandle", comm, peer))
    return ncclUnhandledCudaError;
  h->slots = c->slots_;
  h->pid = getpid();
  h->cudaDev = comm->cudaDev;
  h->nChannels = c->nChannels_;
  h->slotBytes = c->slotBytes_;
  h->magic = kIpcMagic;
  NCCLCHECK(c->finish(comm));
  *out = std::move(c);
  return ncclSuccess;
}

static ncclResult_t ipcOpenSend(ncclComm* comm, int peer, int tag, ConnPtr* out) {
  auto c = std::make_unique<IpcConnection>(comm, peer, true);
  NCCLCHECK(shmSegmentOpen(comm, "the device FIFO to rank " + std::to_string(peer), shmSegmentName(comm, comm->rank, peer, tag),
                         c->bytes_, &c->map_));
  IpcHeader* h = c->header();
  if (h->magic != kIpcMagic || h->nChannels != c->nChannels_) {
    WARN("%s (rank %d): the device connector from rank %d has %d channels where %d were expected", comm->name.c_str(),
         comm->rank, peer, h->nChannels, c->nChannels_);
    return ncclInternalError;
  }
  c->slotBytes_ = h->slotBytes;
  if (c->slotBytes_ == 0 || c->slotBytes_ % alignof(DevCounters) != 0) {  // the counters follow the slots
    WARN("%s (rank %d): the device connector from rank %d has slots of %llu bytes", comm->name.c_str(), comm->rank,
         peer, static_cast<unsigned long long>(c->slotBytes_));
    return ncclInternalError;
  }
  if (!devCudaOk(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm, peer)) return ncclUnhandledCudaError;
  if (sameProcess(comm, peer)) {
    c->slots_ = h->slots;  // same process: the pointer itself (IPC refuses to import into its exporter)
    if (h->cudaDev != comm->cudaDev) {
      cudaError_t e = cudaDeviceEnablePeerAccess(h->cudaDev, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled &&
          !devCudaOk(e, "cudaDeviceEnablePeerAccess", comm, peer))
        return ncclUnhandledCudaError;
      (void)cudaGetLastError();
    }
  } else {
    if (!devCudaOk(cudaIpcOpenMemHandle(&c->slots_, h->handle, cudaIpcMemLazyEnablePeerAccess),
                "cudaIpcOpenMemHandle (the peer's FIFO slots)", comm, peer))
      return ncclUnhandledCudaError;
    c->imported_ = true;
  }
  NCCLCHECK(c->finish(comm));
  *out = std::move(c);
  return ncclSuccess;
}

static void ipcUnlinkRecv(Connection* recv) {
  auto* c = dynamic_cast<IpcConnection*>(recv);
  if (c && !c->name_.empty()) {
    shm_unlink(c->name_.c_str());
    c->name_.clear();
  }
}

}  // namespace accl

#else  // no CUDA executor: device connectors cannot exist

#include "base/check.h"
#include "bootstrap/socket.h"
#include "core/comm.h"
#include "transport/connection.h"
#include "transport/transport.h"

namespace accl {

static ncclResult_t ipcCreateRecv(ncclComm* comm, int, int, ConnPtr*) {
  WARN("%s: device connectors need a CUDA build of ACCL", comm->name.c_str());
  return ncclInternalError;
}
static ncclResult_t ipcOpenSend(ncclComm* comm, int peer, int tag, ConnPtr* out) { return ipcCreateRecv(comm, peer, tag, out); }
static void ipcUnlinkRecv(Connection*) {}

}  // namespace accl
#endif  // ACCL_HAVE_DEVICE_PATH

// The table entry, over either variant above.
namespace accl {

namespace {

// Device connectors with a rank of this host (another host's go through the network).
bool ipcCanConnect(const ncclComm* comm, int peer, int tag) {
  return tag >= kTagDevice && comm->peers[peer].hostHash == comm->peers[comm->rank].hostHash;
}

ncclResult_t ipcRecvSide(ncclComm* comm, int peer, int tag, int* fd, const Deadline& dl, ConnPtr* out) {
  NCCLCHECK(ipcCreateRecv(comm, peer, tag, out));
  return socketSend(*fd, &kIpcTransport.code, 1, dl);
}

ncclResult_t ipcSendSide(ncclComm* comm, int peer, int tag, int* fd, const Deadline& dl, ConnPtr* out) {
  NCCLCHECK(ipcOpenSend(comm, peer, tag, out));
  return socketSend(*fd, &kIpcTransport.code, 1, dl);
}

}  // namespace

const Transport kIpcTransport = {"ipc", 'I', ipcCanConnect, ipcRecvSide, ipcSendSide, ipcUnlinkRecv};

}  // namespace accl
