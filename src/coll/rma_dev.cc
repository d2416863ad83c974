// Windows of device memory (coll/rma_dev.h says how they work).
#include "coll/rma_dev.h"

#ifdef ACCL_HAVE_DEVICE_PATH
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "base/check.h"
#include "bootstrap/bootstrap.h"
#include "coll/dev_comm.h"
#include "coll/dev_ipc.h"
#include "coll/dev_state.h"
#include "coll/host_direct.h"
#include "coll/rma.h"
#include "device/dev_launch.h"

namespace accl {

class RmaDev {
 public:
  explicit RmaDev(ncclComm* comm) : comm_(comm) {}
  ~RmaDev();
  ncclResult_t init();

  ncclComm* comm_;
  uint64_t* signals = nullptr;   // device memory, by peer: signals raised here
  uint64_t* consumed = nullptr;  // device memory, by peer: signals taken by waits
  uint32_t* finished = nullptr;  // host-mapped count of eager wait kernels that ended
  uint32_t* finishedDev = nullptr;
  std::atomic<uint32_t> issued{0};  // eager wait kernels queued
  std::vector<uint64_t*> peerSignals;  // every rank's array, mapped here (empty until the first window;
                                       // NULL for ranks on other hosts)
  std::vector<void*> opened;           // IPC mappings of the peers' arrays
  cudaStream_t landStream = nullptr;   // the receiver thread's copies and signals (puts from other hosts)
  // Direct collectives on symmetric windows (ranks of several processes on
  // one GPU): the device table of every rank's window of each index.
  char** winBases = nullptr;  // kDevMaxDirectWindows x kDevMaxDirect, device memory
};

void RmaDevDeleter::operator()(RmaDev* d) const { delete d; }

namespace {

bool otherProcessHere(const ncclComm* comm) {
  for (int q = 0; q < comm->nranks; ++q)
    if (!sameProcess(comm, q) && comm->peers[q].hostHash == comm->peers[comm->rank].hostHash) return true;
  return false;
}

// A kernel on this rank's device adds to memory of `dev` (a peer in this process on another GPU).
ncclResult_t reachable(ncclComm* comm, int peer, int dev) {
  if (dev == comm->cudaDev) return ncclSuccess;
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, comm->cudaDev, dev) != cudaSuccess || !can) {
    (void)cudaGetLastError();
    WARN("ncclCommWindowRegister (%s, rank %d): device %d cannot access device %d of rank %d (no peer access): "
         "device windows need it between the GPUs of one process", comm->name.c_str(), comm->rank, comm->cudaDev,
         dev, peer);
    return ncclInvalidUsage;
  }
  cudaError_t e = cudaDeviceEnablePeerAccess(dev, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) e = cudaSuccess;
  (void)cudaGetLastError();
  return cudaCheck(e, "cudaDeviceEnablePeerAccess", comm);
}

// Direct collectives of ranks in several processes use this window.
bool directWindow(ncclComm* comm, const ncclWindow_vidmem* win) {
  const DevState* d = comm->dev.get();
  return d && d->directBlocks > 0 && !d->direct && (win->flags & NCCL_WIN_COLL_SYMMETRIC) &&
         win->index < kDevMaxDirectWindows;
}

// Writes the window's row of the direct collectives' table: every rank's
// window as mapped here (`bases`), or NULLs when it goes.
ncclResult_t publishWindow(ncclComm* comm, RmaDev* dev, const ncclWindow_vidmem* win, char* const* bases) {
  if (!directWindow(comm, win)) return ncclSuccess;
  const size_t tableBytes = sizeof(char*) * kDevMaxDirectWindows * kDevMaxDirect;
  if (!dev->winBases) {
    if (!bases) return ncclSuccess;
    void* p = nullptr;
    CUDACHECK(cudaMalloc(&p, tableBytes), "cudaMalloc (window table)", comm);
    ncclResult_t r = devWriteSync(comm, p, nullptr, tableBytes, "cudaMemset (window table)");
    if (r != ncclSuccess) {
      (void)cudaFree(p);
      return r;
    }
    dev->winBases = static_cast<char**>(p);
    comm->gpuBytes += tableBytes;
  }
  char* row[kDevMaxDirect] = {};
  for (int q = 0; bases && q < comm->nranks; ++q) row[q] = bases[q];
  return devWriteSync(comm, dev->winBases + win->index * kDevMaxDirect, row, sizeof row, "cudaMemcpy (window table)");
}

}  // namespace

ncclResult_t RmaDev::init() {
  // Before the registration's allgather: no rank waits before every rank of
  // this process has loaded the signal kernel.
  CUDACHECK(devLoadRmaKernels(), "loading the one-sided kernels", comm_);
  const size_t bytes = 2 * comm_->nranks * sizeof(uint64_t);  // signals, consumed
  void* p = nullptr;
  CUDACHECK(cudaMalloc(&p, bytes), "cudaMalloc (signals)", comm_);
  signals = static_cast<uint64_t*>(p);
  consumed = signals + comm_->nranks;
  comm_->gpuBytes += bytes;
  NCCLCHECK(devWriteSync(comm_, p, nullptr, bytes, "cudaMemset (signals)"));
  CUDACHECK(cudaHostAlloc(&p, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc",
            comm_);
  finished = static_cast<uint32_t*>(p);
  *finished = 0;
  CUDACHECK(cudaHostGetDevicePointer(&p, finished, 0), "cudaHostGetDevicePointer", comm_);
  finishedDev = static_cast<uint32_t*>(p);
  CUDACHECK(cudaStreamCreateWithFlags(&landStream, cudaStreamNonBlocking), "cudaStreamCreate", comm_);
  return ncclSuccess;
}

RmaDev::~RmaDev() {
  for (void* p : opened) ipcClose(p);
  if (winBases) (void)cudaFree(winBases);
  if (landStream) (void)cudaStreamDestroy(landStream);
  if (signals) (void)cudaFree(signals);  // waits for the kernels that use it
  if (finished) (void)cudaFreeHost(finished);
  (void)cudaGetLastError();
}

void rmaDevExport(ncclComm* comm, RmaDevPtr* dev, void* buff, RmaDevExport* out) {
  memset(out, 0, sizeof *out);
  out->cudaDev = comm->cudaDev;
  out->base = reinterpret_cast<uint64_t>(buff);
  if (cudaCheck(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm) != ncclSuccess) return;
  if (!*dev) {
    RmaDevPtr d(new RmaDev(comm));
    if (d->init() != ncclSuccess) return;  // reported
    *dev = std::move(d);
  }
  RmaDev& d = **dev;
  out->signals = reinterpret_cast<uint64_t>(d.signals);
  if (otherProcessHere(comm)) {  // those peers map the window and the signals through CUDA IPC
    cudaIpcMemHandle_t h;
    if (cudaCheck(cudaIpcGetMemHandle(&h, d.signals), "cudaIpcGetMemHandle (signals)", comm) != ncclSuccess) return;
    memcpy(out->sigHandle, &h, sizeof h);
    if (buff) {
      char* base = nullptr;
      size_t allocBytes = 0;
      cudaError_t e = allocationRange(buff, &base, &allocBytes) ? cudaIpcGetMemHandle(&h, base) : cudaErrorInvalidValue;
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        WARN("ncclCommWindowRegister (%s, rank %d): the window at %p cannot be shared with the ranks in other "
             "processes through CUDA IPC (%s): register memory from cudaMalloc or ncclMemAlloc",
             comm->name.c_str(), comm->rank, buff, cudaGetErrorString(e));
        return;
      }
      memcpy(out->winHandle, &h, sizeof h);
      out->winOffset = static_cast<uint64_t>(static_cast<char*>(buff) - base);
    }
  }
  out->ok = 1;
}

ncclResult_t rmaDevAttach(ncclComm* comm, RmaDev* dev, ncclWindow_vidmem* win, const std::vector<RmaDevExport>& all) {
  const int n = comm->nranks;
  win->device = true;
  win->peerBase.assign(n, nullptr);
  const bool first = dev->peerSignals.empty();
  if (first) dev->peerSignals.assign(n, nullptr);
  ncclResult_t r = ncclSuccess;
  for (int q = 0; q < n && r == ncclSuccess; ++q) {
    const RmaDevExport& e = all[q];
    if (comm->peers[q].hostHash != comm->peers[comm->rank].hostHash) continue;  // staged: no mapping
    if (sameProcess(comm, q)) {
      if (q != comm->rank) r = reachable(comm, q, e.cudaDev);
      win->peerBase[q] = reinterpret_cast<char*>(e.base);
      if (first) dev->peerSignals[q] = reinterpret_cast<uint64_t*>(e.signals);
      continue;
    }
    void* p = nullptr;
    if (e.base && (r = ipcOpen(comm, e.winHandle, q, "ncclCommWindowRegister", &p)) == ncclSuccess) {
      win->opened.push_back(p);
      win->peerBase[q] = static_cast<char*>(p) + e.winOffset;
    }
    if (first && r == ncclSuccess && (r = ipcOpen(comm, e.sigHandle, q, "ncclCommWindowRegister", &p)) == ncclSuccess) {
      dev->opened.push_back(p);
      dev->peerSignals[q] = static_cast<uint64_t*>(p);
    }
  }
  if (r == ncclSuccess) r = publishWindow(comm, dev, win, win->peerBase.data());
  if (r != ncclSuccess) {
    rmaDevDetach(dev, win);
    if (first) {
      for (void* p : dev->opened) ipcClose(p);
      dev->opened.clear();
      dev->peerSignals.clear();
    }
  }
  return r;
}

void rmaDevDetach(RmaDev* dev, ncclWindow_vidmem* win) {
  if (dev && !win->peerBase.empty()) (void)publishWindow(dev->comm_, dev, win, nullptr);
  for (void* p : win->opened) ipcClose(p);
  win->opened.clear();
  win->peerBase.clear();
}

ncclResult_t rmaDevPut(ncclComm* comm, RmaDev* dev, int peer, const ncclWindow_vidmem* win, size_t offset,
                       const void* src, size_t bytes, void* stream, const char* opName) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  CUDACHECK(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm);
  if (!dev->peerSignals[peer]) {  // another host: the proxy sends it
    const int index = win ? win->index : -1;
    // Device memory from a staged copy; host memory as it is when the stream
    // gets there (a host-to-host copy on the stream would not wait for the
    // stream's earlier work, which may still use the staging buffer).
    const char* direct = bytes && !devBuffer(src) ? static_cast<const char*>(src) : nullptr;
    return devRunStagedCall(
        comm, stream, direct ? nullptr : src, direct ? 0 : bytes,
        [comm, peer, index, offset, bytes, opName, direct](const char* staged) {
          return rmaSend(comm, peer, index, offset, direct ? direct : staged, bytes, opName);
        },
        opName);
  }
  char* dst = win && bytes ? win->peerBase[peer] + offset : nullptr;
  uint64_t* signal = dev->peerSignals[peer] + comm->rank;
  return ordered(comm, s, opName, [&]() -> cudaError_t {
    if (bytes) {
      cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
      if (e != cudaSuccess) return e;
    }
    return devLaunchSignal(signal, s);
  });
}

ncclResult_t rmaDevWait(ncclComm* comm, RmaDev* dev, const ncclWaitSignalDesc_t* descs, int n, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  CUDACHECK(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm);
  std::map<int, uint64_t> need;  // by peer: one entry each, however often it is named
  for (int i = 0; i < n; ++i)
    if (descs[i].opCnt > 0) need[descs[i].peer] += static_cast<uint64_t>(descs[i].opCnt);
  const bool counted = !capturing(s);  // a captured wait ends on every replay: not counted
  DevRmaWait w{};
  w.ctx = ctxOf(comm);
  w.signals = dev->signals;
  w.consumed = dev->consumed;
  w.finished = counted ? dev->finishedDev : nullptr;
  auto launch = [&]() -> ncclResult_t {
    if (counted) dev->issued.fetch_add(1);
    ncclResult_t r = ordered(comm, s, "ncclWaitSignal", [&] { return devLaunchWaitSignal(w, s); });
    if (r != ncclSuccess && counted) dev->issued.fetch_sub(1);
    w.n = 0;
    return r;
  };
  for (const auto& [peer, count] : need) {
    w.peer[w.n] = peer;
    w.need[w.n] = count;
    if (++w.n == kDevMaxWaitEntries) NCCLCHECK(launch());
  }
  if (w.n > 0) NCCLCHECK(launch());
  return ncclSuccess;
}

namespace {
// The receiver thread's first CUDA work: its device, and relaxed capture mode,
// so that another thread capturing a graph (global mode) does not fail its
// copies and synchronizations.
ncclResult_t landStream(ncclComm* comm, RmaDev*) {
  static thread_local bool ready = false;
  if (ready) return ncclSuccess;
  CUDACHECK(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  CUDACHECK(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode", comm);
  ready = true;
  return ncclSuccess;
}
}  // namespace

ncclResult_t rmaDevLand(ncclComm* comm, RmaDev* dev, char* dst, const void* src, size_t bytes) {
  NCCLCHECK(landStream(comm, dev));
  // `src` is a FIFO slot, released after this returns: the copy must be done.
  CUDACHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, dev->landStream), "cudaMemcpyAsync (put)",
            comm);
  CUDACHECK(cudaStreamSynchronize(dev->landStream), "cudaStreamSynchronize (put)", comm);
  return ncclSuccess;
}

ncclResult_t rmaDevRaise(ncclComm* comm, RmaDev* dev, int peer) {
  NCCLCHECK(landStream(comm, dev));
  CUDACHECK(devLaunchSignal(dev->signals + peer, dev->landStream), "the signal kernel", comm);
  return ncclSuccess;
}

ncclResult_t rmaDevFlush(ncclComm* comm, RmaDev* dev) {
  if (dev && dev->landStream) CUDACHECK(cudaStreamSynchronize(dev->landStream), "cudaStreamSynchronize", comm);
  return ncclSuccess;
}

void rmaDevDirect(ncclComm* comm, RmaDev* dev, DevCollWork* w, size_t sendBytes, size_t recvBytes) {
  w->sendWin = w->recvWin = -1;
  if (!dev || !dev->winBases) return;
  w->winBases = dev->winBases;
  w->winCount = kDevMaxDirectWindows;
  int win = -1;
  size_t off = 0;
  if (rmaFindSymmetric(comm, w->send, sendBytes, &win, &off) && win < kDevMaxDirectWindows) {
    w->sendWin = win;
    w->sendOff = off;
  }
  if (rmaFindSymmetric(comm, w->recv, recvBytes, &win, &off) && win < kDevMaxDirectWindows) {
    w->recvWin = win;
    w->recvOff = off;
  }
}

bool rmaDevWaiting(const RmaDev* dev) {
  return dev && dev->issued.load() != *reinterpret_cast<volatile const uint32_t*>(dev->finished);
}

}  // namespace accl

#else  // built without the CUDA executor: device mode never starts, no window is device memory

namespace accl {
class RmaDev {};
void RmaDevDeleter::operator()(RmaDev* d) const { delete d; }
void rmaDevExport(ncclComm*, RmaDevPtr*, void*, RmaDevExport* out) { *out = RmaDevExport{}; }
ncclResult_t rmaDevAttach(ncclComm*, RmaDev*, ncclWindow_vidmem*, const std::vector<RmaDevExport>&) {
  return ncclInternalError;
}
void rmaDevDetach(RmaDev*, ncclWindow_vidmem*) {}
ncclResult_t rmaDevPut(ncclComm*, RmaDev*, int, const ncclWindow_vidmem*, size_t, const void*, size_t, void*,
                       const char*) {
  return ncclInternalError;
}
ncclResult_t rmaDevWait(ncclComm*, RmaDev*, const ncclWaitSignalDesc_t*, int, void*) { return ncclInternalError; }
ncclResult_t rmaDevLand(ncclComm*, RmaDev*, char*, const void*, size_t) { return ncclInternalError; }
ncclResult_t rmaDevRaise(ncclComm*, RmaDev*, int) { return ncclInternalError; }
ncclResult_t rmaDevFlush(ncclComm*, RmaDev*) { return ncclSuccess; }
bool rmaDevWaiting(const RmaDev*) { return false; }
void rmaDevDirect(ncclComm*, RmaDev*, DevCollWork*, size_t, size_t) {}  // never called: no device mode
}  // namespace accl

#endif
