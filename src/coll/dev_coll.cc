// Device mode: collectives and point-to-point batches as kernels on the
// caller's stream (device/dev_launch.cu), over device connectors
// (transport/ipc.cc). Calls return once the kernel is queued; a kernel that
// stops early (abort, a failed peer, ACCL_TIMEOUT) leaves a DevStatus that
// devCheck turns into a WARN and the communicator's error.
//
// Ordering: one communicator's kernels share connector counters, so a kernel
// launched on another stream than the previous one first waits for it (an
// event), as NCCL serialises a communicator's work. Graph capture skips that
// (the graph's own order holds), and a replay continues from the counters the
// previous kernel left in device memory.
#include "coll/dev_comm.h"

#include "base/check.h"
#include "base/threads.h"
#include "coll/coll.h"
#include "core/comm.h"
#include "core/mode.h"
#include "transport/peer_life.h"

#ifdef ACCL_HAVE_DEVICE_PATH
#include <cuda_runtime.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "base/param.h"
#include "coll/dev_state.h"
#include "coll/host_direct.h"
#include "coll/permutation.h"
#include "coll/rma.h"
#include "coll/rma_dev.h"
#include "device/dev_launch.h"
#include "transport/connection.h"
#include "transport/connections.h"

namespace accl {

namespace {
void watchLoop(ncclComm* comm);  // below, with watchPeers

void stopWatcher(DevState& d) {
  {
    std::lock_guard<std::mutex> lock(d.watcherMu);
    d.watcherStop = true;
  }
  d.watcherWake.notify_all();
  if (d.watcher.joinable()) d.watcher.join();
}
}  // namespace

void DevStateDeleter::operator()(DevState* d) const {
  stopWatcher(*d);    // it reads the status word
  d->stager.reset();  // its thread and pinned memory first
  if (d->lastEvent) (void)cudaEventDestroy(d->lastEvent);
  if (d->joinEvent) (void)cudaEventDestroy(d->joinEvent);
  if (d->status) (void)cudaFreeHost(d->status);
  (void)cudaGetLastError();
  delete d;
}

namespace {

constexpr size_t kBytesPerChannel = 256 << 10;  // a collective uses one channel per this many bytes
constexpr int kMaxChannels = 64;  // per connector, set or automatic (ACCL_NCHANNELS)
constexpr size_t kP2pBytesPerChannel = 512 << 10;
constexpr size_t kDirectBytesPerBlock = 64 << 10;

int pow2Floor(int x) {  // the largest power of two not above x (1 for x < 2)
  int p = 1;
  while (p <= x / 2) p *= 2;
  return p;
}

// Whether sends and receives with `peer` may copy between the two ranks'
// buffers: it is a rank of this very process (its key, not only its pid,
// which repeats across pid namespaces) on this GPU, so its addresses are
// valid in this rank's kernels (ACCL_P2P_DIRECT=0: never).
bool p2pDirectPeer(const ncclComm* comm, int peer) {
  const PeerInfo& me = comm->peers[comm->rank];
  const PeerInfo& p = comm->peers[peer];
  return peer != comm->rank && sameProcess(comm, peer) && p.hostHash == me.hostHash && p.devKey == me.devKey &&
         paramInt(Param::P2pDirect) != 0;
}

uint64_t fnv(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  return h;
}

DevOp devOpOf(OpKind k) {
  switch (k) {
    case OpKind::Sum: return DevOp::Sum;
    case OpKind::Prod: return DevOp::Prod;
    case OpKind::Max: return DevOp::Max;
    case OpKind::Min: return DevOp::Min;
    case OpKind::PreMulSum: return DevOp::PreMulSum;
    case OpKind::SumPostDiv: return DevOp::SumPostDiv;
  }
  return DevOp::Sum;
}

}  // namespace

ncclResult_t cudaCheck(cudaError_t e, const char* what, const ncclComm* comm) {
  if (e == cudaSuccess) return ncclSuccess;
  (void)cudaGetLastError();
  WARN("%s (rank %d, device %d): %s failed: %s", comm->name.c_str(), comm->rank, comm->cudaDev, what,
       cudaGetErrorString(e));
  return ncclUnhandledCudaError;
}

DevCtx ctxOf(ncclComm* comm) {
  DevCtx c;
  c.status = comm->dev->statusDev;
  int64_t t = paramInt(Param::Timeout);
  c.timeoutNs = t > 0 ? static_cast<uint64_t>(t) * 1000000000ull : 0;
  c.rank = comm->rank;
  c.nranks = comm->nranks;
  return c;
}

bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &st) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return st != cudaStreamCaptureStatusNone;
}

void* driverFunction(const char* symbol) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion(symbol, &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    f = nullptr;
  (void)cudaGetLastError();
  return f;
}

int devChoose(int requested) {
  if (!queryMode().device) return -1;
  if (requested >= 0) return requested % std::max(1, queryMode().deviceCount);
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return dev;
}

ncclResult_t devProbe(ncclComm* comm, PeerInfo* me) {
  CUDACHECK(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm);
  cudaDeviceProp prop;
  CUDACHECK(cudaGetDeviceProperties(&prop, comm->cudaDev), "cudaGetDeviceProperties", comm);
  me->smCount = prop.multiProcessorCount;
  comm->nvmlDev = gpuPciIndex(prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
  snprintf(comm->gpuPci, sizeof(comm->gpuPci), "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID,
           prop.pciDeviceID);
  me->devKey = fnv(&prop.uuid, sizeof(prop.uuid));
  me->wantChannels = static_cast<int32_t>(std::clamp<int64_t>(paramInt(Param::NChannels), 0, kMaxChannels));
  me->wantP2pChannels = static_cast<int32_t>(std::clamp<int64_t>(paramInt(Param::P2pNChannels), 0, kMaxChannels));
  me->stageChunk = std::max<int64_t>(0, paramInt(Param::StageChunkBytes));
  me->netKernels = paramInt(Param::NetKernels) != 0;
  return ncclSuccess;
}

void devStopWatch(ncclComm* comm) {
  if (comm->dev) stopWatcher(*comm->dev);
}

void devStop(ncclComm* comm) {
  if (!comm->dev) return;
  stopWatcher(*comm->dev);  // it walks the connections, which go next
  comm->dev->stager.reset();
  devDirectRelease(comm);
}

void devStopKernels(ncclComm* comm) {
  if (!comm->dev || !comm->dev->status) return;
  comm->dev->status->stop = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

ncclResult_t devSetup(ncclComm* comm) {
  DevStatePtr d(new DevState());
  // Channels: every rank's blocks must be resident at once (they wait for each
  // other), so the multiprocessors are shared among the ranks of the busiest GPU.
  std::map<std::pair<uint64_t, uint64_t>, int> perGpu;
  int sms = 1 << 30, busiest = 1;
  for (const PeerInfo& p : comm->peers) {
    busiest = std::max(busiest, ++perGpu[{p.hostHash, p.devKey}]);
    sms = std::min(sms, p.smCount);
  }
  // A send or receive gets its share of the channels when a rank sends to and
  // receives from every rank at once (alltoall), so a group's blocks stay
  // within the rank's channels however many peers it names. Every rank takes
  // the fewest any rank asks for: both ends of a connector slice alike.
  const int auto_ = std::max(1, std::min(kMaxChannels, sms / busiest));
  d->nChannels = kMaxChannels;
  int p2pWant = kMaxChannels;
  for (const PeerInfo& p : comm->peers) {
    d->nChannels = std::min(d->nChannels, p.wantChannels > 0 ? static_cast<int>(p.wantChannels) : auto_);
    if (p.wantP2pChannels > 0) p2pWant = std::min(p2pWant, static_cast<int>(p.wantP2pChannels));
  }
  // Between hosts the ring's collectives run in kernels where every rank
  // lets them; a connector between hosts is one network connection, so the
  // ring has one channel there (its kernel one block).
  d->netRing = comm->nhosts > 1;
  for (const PeerInfo& p : comm->peers) d->netRing = d->netRing && p.netKernels;
  if (d->netRing) d->nChannels = 1;
  d->p2pChannels = std::max(1, std::min(p2pWant, d->nChannels / (2 * comm->nranks)));
  comm->devChannels = d->nChannels;
  // Every rank must cut a staged call into the same chunks: the smallest any asks for.
  d->stageChunk = INT64_MAX;
  for (const PeerInfo& p : comm->peers) d->stageChunk = std::min(d->stageChunk, p.stageChunk);
  // At least one block per send and receive: a group with every rank (an
  // alltoall between processes, or any group of sends and receives with every
  // peer) among more ranks on one GPU than half its channels may need more
  // blocks than the GPU holds at once (two per multiprocessor), and would wait.
  const int64_t groupBlocks = int64_t(2 * (comm->nranks - 1)) * d->p2pChannels * busiest;
  if (groupBlocks > 2 * int64_t(sms))
    WARN("%s rank %d: %d ranks on one GPU: a group of sends and receives with every rank needs %lld "
         "blocks at once, more than the GPU's %d multiprocessors hold; it may wait until ACCL_TIMEOUT",
         comm->name.c_str(), comm->rank, busiest, static_cast<long long>(groupBlocks), sms);
  d->smCount = std::max(1, sms);
  void* status = nullptr;
  CUDACHECK(cudaHostAlloc(&status, sizeof(DevStatus), cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc",
            comm);
  d->status = static_cast<DevStatus*>(status);
  memset(status, 0, sizeof(DevStatus));
  d->peersGone.reset(new std::atomic<const char*>[comm->nranks]);
  const uint64_t host = comm->peers[comm->rank].hostHash;
  for (int k = 0; k < comm->nranks; ++k) {
    d->peersGone[k].store(nullptr);
    if (k != comm->rank && comm->peers[k].hostHash == host && !sameProcess(comm, k)) d->watchesPeers = true;
  }
  // Read once: every call looks.
  d->peerCheckMs = static_cast<uint64_t>(std::max<int64_t>(1, paramInt(Param::PeerCheckMs)));
  void* dev = nullptr;
  CUDACHECK(cudaHostGetDevicePointer(&dev, status, 0), "cudaHostGetDevicePointer", comm);
  d->statusDev = static_cast<DevStatus*>(dev);
  CUDACHECK(cudaEventCreateWithFlags(&d->lastEvent, cudaEventDisableTiming), "cudaEventCreate", comm);
  CUDACHECK(cudaEventCreateWithFlags(&d->joinEvent, cudaEventDisableTiming), "cudaEventCreate", comm);
  comm->dev = std::move(d);
  if (comm->nranks > 1 && (comm->nhosts == 1 || comm->dev->netRing)) {
    std::vector<Connection*> s, r;
    NCCLCHECK(getConnections(comm, {comm->ring.next}, {comm->ring.prev}, kTagDevRing, &s, &r));
    comm->dev->ringSend = s[0];
    comm->dev->ringRecv = r[0];
    if (comm->nhosts == 1) NCCLCHECK(devDirectSetup(comm));
  }
  // Between hosts, device buffers are staged: load the staged path's kernel
  // now, not at the first call, where loading it waits for the kernels then
  // running (the call would not return before the GPU reached it).
  if (comm->nhosts > 1) CUDACHECK(devLoadStageKernel(), "loading the staged path's kernel", comm);
  int local = 0;
  comm->dev->p2pDirect.resize(comm->nranks);
  for (int peer = 0; peer < comm->nranks; ++peer) {
    comm->dev->p2pDirect[peer] = p2pDirectPeer(comm, peer);
    local += comm->dev->p2pDirect[peer];
  }
  INFO(kInit, "%s rank %d: device %d, %d channel(s) per connector, %d per send/recv; sends and receives larger than "
       "their channels' slots copy directly with %d rank(s) of this process on this device", comm->name.c_str(),
       comm->rank, comm->cudaDev, comm->dev->nChannels, comm->dev->p2pChannels, local);
  if (comm->dev->netRing)  // only on several hosts
    INFO(kInit, "%s rank %d: device buffers between hosts: the ring's collectives run in kernels (to rank %d by %s, "
         "from rank %d by %s), the rest staged", comm->name.c_str(), comm->rank, comm->ring.next,
         comm->dev->ringSend->kind, comm->ring.prev, comm->dev->ringRecv->kind);
  else if (comm->nhosts > 1)
    INFO(kInit, "%s rank %d: device buffers between hosts: every call staged through pinned memory "
         "(ACCL_NET_KERNELS=0 on some rank)", comm->name.c_str(), comm->rank);
  if (comm->dev->watchesPeers)
    NCCLCHECK(startThread(&comm->dev->watcher, [comm] { watchLoop(comm); },
                          "%s rank %d's watch of the ranks of this host", comm->name.c_str(), comm->rank));
  return ncclSuccess;
}

bool devRangeInside(const void* p, size_t n, size_t* inside) {
  using GetRange = int (*)(unsigned long long* base, size_t* size, unsigned long long ptr);
  static const auto getRange = reinterpret_cast<GetRange>(driverFunction("cuMemGetAddressRange"));
  // Allocation by allocation: memory mapped in pieces (cuMemMap, as an
  // expandable allocator does) may hold a buffer across several.
  auto at = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p));
  size_t covered = 0;
  while (covered < n) {
    unsigned long long base = 0;
    size_t size = 0;
    if (!getRange || getRange(&base, &size, at) != 0 || base + size <= at) {
      *inside = covered;
      return covered == 0;  // the first: cannot be told; a later one: a gap
    }
    covered += base + size - at;
    at = base + size;
  }
  *inside = covered;
  return true;
}

bool devBuffer(const void* p) {
  if (!p) return false;
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

namespace {

// Ranks of this host in other processes, every ACCL_PEER_CHECK_MS at most: a
// kernel waiting on one that died would wait out ACCL_TIMEOUT. A gone rank's
// connectors are aborted, naming it: a kernel waiting on them stops (and
// aborts its own connectors, so the ranks waiting on it stop too), while one
// that got what it needed first never looks, and neither does an idle rank
// whose peer finished and left. So this is no error by itself: only a wait
// that still needs the rank fails. Run by the watch's own thread
// (watchLoop), where the application polls (ncclCommGetAsyncError, as
// torch's watchdog does; every call) and while the host waits for the
// stream (devWait).
void watchPeers(ncclComm* comm) {
  DevState& d = *comm->dev;
  if (!d.watchesPeers) return;
  const uint64_t now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 std::chrono::steady_clock::now().time_since_epoch()).count());
  if (now - d.lastPeerCheckMs.load(std::memory_order_relaxed) < d.peerCheckMs) return;
  std::unique_lock<std::mutex> lock(d.peerCheckMu, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread looks now
  d.lastPeerCheckMs.store(now, std::memory_order_relaxed);
  for (int k = 0; k < comm->nranks; ++k) {
    if (k == comm->rank || d.peersGone[k].load()) continue;
    const char* why = peerGone(comm, k);
    if (!why) continue;
    d.peersGone[k].store(why);
    INFO(kInit, "%s rank %d: rank %d is gone (%s): its device connectors are aborted, so that kernels waiting on it "
         "stop", comm->name.c_str(), comm->rank, k, why);
    // Only the kernels' connectors: host waits ask peerGone themselves, and
    // know whether they still need the peer.
    forEachConnection(comm, [k](Connection* c) {
      if (c->peer == k && c->device) c->abort(k);
    });
  }
}

// The watch's own thread: watchPeers every ACCL_PEER_CHECK_MS until
// devStop, while no kernel has failed (once one has, the error is there to
// report). Where the application polls or waits through ACCL, watchPeers runs
// there too, and whichever thread comes first looks.
void watchLoop(ncclComm* comm) {
  pthread_setname_np(pthread_self(), "accl-watch");
  DevState& d = *comm->dev;
  std::unique_lock<std::mutex> lock(d.watcherMu);
  while (!d.watcherWake.wait_for(lock, std::chrono::milliseconds(d.peerCheckMs), [&d] { return d.watcherStop; })) {
    lock.unlock();
    if (d.status->reason == kDevOk) watchPeers(comm);
    lock.lock();
  }
}

}  // namespace

ncclResult_t devCheck(ncclComm* comm) {
  if (comm->dev && comm->dev->status && comm->dev->status->reason == kDevOk) watchPeers(comm);
  if (comm->dev && comm->dev->status && comm->dev->status->reason != kDevOk && !comm->dev->reported) {
    DevState& d = *comm->dev;
    d.reported = true;
    const DevStatus& s = *d.status;
    const char* dir = s.isSend ? "sending to" : "receiving from";
    ncclResult_t err = ncclRemoteError;
    switch (s.reason) {
      case kDevTimeout:
        err = ncclTimeout;
        WARN("%s (rank %d of %d, device %d): a kernel timed out (ACCL_TIMEOUT) %s rank %d", comm->name.c_str(),
             comm->rank, comm->nranks, comm->cudaDev, dir, s.peer);
        break;
      case kDevStageTimeout:
        err = ncclTimeout;
        WARN("%s (rank %d of %d, device %d): a staged operation on device buffers timed out (ACCL_TIMEOUT) waiting "
             "for the network proxy", comm->name.c_str(), comm->rank, comm->nranks, comm->cudaDev);
        break;
      case kDevStageStopped:
        WARN("%s (rank %d of %d, device %d): a staged operation on device buffers stopped waiting for the network "
             "proxy: the communicator failed or was aborted", comm->name.c_str(), comm->rank, comm->nranks,
             comm->cudaDev);
        break;
      case kDevSignalTimeout:
        err = ncclTimeout;
        WARN("ncclWaitSignal (%s, rank %d of %d, device %d): timed out (ACCL_TIMEOUT) waiting for %llu signal(s) "
             "from rank %d (%llu arrived)", comm->name.c_str(), comm->rank, comm->nranks, comm->cudaDev,
             (unsigned long long)s.expected, s.peer, (unsigned long long)s.got);
        break;
      case kDevSignalStopped:
        WARN("ncclWaitSignal (%s, rank %d, device %d): stopped waiting for signals from rank %d: the communicator "
             "failed or was aborted", comm->name.c_str(), comm->rank, comm->cudaDev, s.peer);
        break;
      case kDevSizeMismatch:
        err = ncclInvalidUsage;
        WARN("%s (rank %d, device %d): rank %d sent %llu bytes where %llu were expected (do all ranks call the "
             "same operations with the same counts?)", comm->name.c_str(), comm->rank, comm->cudaDev, s.peer,
             (unsigned long long)s.got, (unsigned long long)s.expected);
        break;
      case kDevCountMismatch:
        err = ncclInvalidUsage;
        WARN("%s (rank %d, device %d): rank %d called a collective on %llu bytes where this rank's has %llu (do all "
             "ranks call the same collectives with the same counts and types?)", comm->name.c_str(), comm->rank,
             comm->cudaDev, s.peer, (unsigned long long)s.got, (unsigned long long)s.expected);
        break;
      case kDevAsymmetric:
        err = ncclInvalidUsage;
        WARN("%s (rank %d, device %d): rank %d's %s buffer of a direct collective is not mapped in this process (do "
             "all ranks call the same collective with the same root?)",
             comm->name.c_str(), comm->rank, comm->cudaDev, s.peer, s.isSend ? "receive" : "send");
        break;
      default:
        if (const char* gone = s.failedRank >= 0 && s.failedRank < comm->nranks ? d.peersGone[s.failedRank].load()
                                                                                 : nullptr)  // watchPeers found it
          WARN("%s (rank %d, device %d): a kernel stopped %s rank %d: rank %d is gone (%s)", comm->name.c_str(),
               comm->rank, comm->cudaDev, dir, s.peer, s.failedRank, gone);
        else if (s.failedRank >= 0 && s.failedRank != s.peer && s.failedRank != comm->rank)
          WARN("%s (rank %d, device %d): a kernel stopped %s rank %d: the peer stopped because rank %d failed",
               comm->name.c_str(), comm->rank, comm->cudaDev, dir, s.peer, s.failedRank);
        else
          WARN("%s (rank %d, device %d): a kernel stopped %s rank %d: the connector was aborted", comm->name.c_str(),
               comm->rank, comm->cudaDev, dir, s.peer);
        commNoteFailedRank(comm, s.failedRank >= 0 ? s.failedRank : s.peer);
        break;
    }
    commSetError(comm, err);
  }
  return static_cast<ncclResult_t>(comm->asyncError.load());
}

ncclResult_t devWait(ncclComm* comm) {
  if (!comm->dev) return ncclSuccess;
  CUDACHECK(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm);
  if (comm->dev->haveLast && !comm->dev->watchesPeers) {
    CUDACHECK(cudaEventSynchronize(comm->dev->lastEvent), "cudaEventSynchronize", comm);
  } else if (comm->dev->haveLast) {
    // Polled, so that a kernel waiting on a dead rank of this host stops
    // once watchPeers (in devCheck) finds it gone; naps are short, since this
    // wait is on every host operation's path once staged calls exist. Like
    // cudaEventSynchronize, it waits for the work to end also after an abort
    // (which stops the kernels): the callers free what that work uses next.
    cudaError_t e;
    unsigned turns = 0, yields = 0;  // unsigned: wraps, never overflows
    while ((e = cudaEventQuery(comm->dev->lastEvent)) == cudaErrorNotReady) {
      if (++turns % 64 == 0) (void)devCheck(comm);
      if (yields < 256) {
        ++yields;
        sched_yield();
      } else {
        usleep(20);
      }
    }
    CUDACHECK(e, "cudaEventQuery", comm);
  }
  ncclResult_t r = devCheck(comm);
  return r == ncclInProgress ? ncclSuccess : r;
}

ncclResult_t devWriteSync(ncclComm* comm, void* dst, const void* src, size_t bytes, const char* what) {
  cudaStream_t s = nullptr;
  CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate", comm);
  cudaError_t e = src ? cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s) : cudaMemsetAsync(dst, 0, bytes, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  (void)cudaStreamDestroy(s);
  return cudaCheck(e, what, comm);
}

ncclResult_t devReadScalar(const CollArgs& a, void* out, bool* copied) {
  *copied = a.comm->dev && devBuffer(a.deviceScalar);
  if (!*copied) return ncclSuccess;
  cudaStream_t s = static_cast<cudaStream_t>(a.stream);
  if (capturing(s)) {  // the copy would join the graph, and the wait end the capture
    WARN("%s (%s, rank %d): a call on host buffers cannot read its PreMulSum scalar from device memory "
         "(ncclScalarDevice) while its stream is being captured: use ncclScalarHostImmediate, or device buffers",
         a.opName, a.comm->name.c_str(), a.comm->rank);
    return ncclInvalidUsage;
  }
  CUDACHECK(cudaSetDevice(a.comm->cudaDev), "cudaSetDevice", a.comm);
  CUDACHECK(cudaMemcpyAsync(out, a.deviceScalar, typeSize(a.type), cudaMemcpyDeviceToHost, s),
            "cudaMemcpyAsync (PreMulSum's device scalar)", a.comm);
  CUDACHECK(cudaStreamSynchronize(s), "cudaStreamSynchronize (PreMulSum's device scalar)", a.comm);
  return ncclSuccess;
}

namespace {

// What every kernel of the call carries, whatever runs it.
DevCollWork baseWork(const CollArgs& a) {
  DevCollWork w{};
  w.ctx = ctxOf(a.comm);
  w.type = a.type;
  w.op = devOpOf(a.red.kind);
  w.root = a.root;
  w.send = a.sendbuff;
  w.recv = a.recvbuff;
  w.count = a.count;
  w.scalarF = a.red.scalar.f;
  w.scalarI = a.red.scalar.i;
  w.scalarPtr = a.deviceScalar;
  const bool reduces = a.kind == CollKind::AllReduce || a.kind == CollKind::Reduce || a.kind == CollKind::ReduceScatter;
  if (!reduces) w.op = DevOp::Sum;
  return w;
}

// A collective of several ranks of this host (device connectors): the rest of
// its work, ring or direct, and the blocks to launch. *keep holds a copy of
// the input where its buffers overlap (freed on the stream once let go).
ncclResult_t collWork(const CollArgs& a, DevCollWork* wp, int* blocksOut, std::shared_ptr<void>* keep) {
  ncclComm* comm = a.comm;
  DevState& d = *comm->dev;
  DevCollWork& w = *wp;
  cudaStream_t s = static_cast<cudaStream_t>(a.stream);
  const int n = comm->nranks;
  const size_t esize = typeSize(a.type);
  switch (a.kind) {
    case CollKind::AllReduce: w.coll = DevColl::AllReduce; break;
    case CollKind::Broadcast: w.coll = DevColl::Broadcast; break;
    case CollKind::Reduce: w.coll = DevColl::Reduce; break;
    case CollKind::AllGather: w.coll = DevColl::AllGather; break;
    case CollKind::ReduceScatter: w.coll = DevColl::ReduceScatter; break;
    // Only where devDirectSendRecvColls said so: they have no ring.
    case CollKind::AllToAll: w.coll = DevColl::AllToAll; break;
    case CollKind::Gather: w.coll = DevColl::Gather; break;
    case CollKind::Scatter: w.coll = DevColl::Scatter; break;
    default: return ncclInternalError;
  }
  if (runsAsSendRecv(a.kind)) {
    if (!d.direct) return ncclInternalError;
    // Buffers that overlap other than in NCCL's in-place layout (all-to-all:
    // one buffer; gather: the input is the root's block of the output;
    // scatter: the reverse): this rank's input goes from a copy, as it did
    // when these were sends and receives. Each rank decides for itself; all
    // still run the same collective.
    const size_t block = a.count * esize;
    const char* send = static_cast<const char*>(a.sendbuff);
    const char* recv = static_cast<const char*>(a.recvbuff);
    const size_t sendBytes = a.kind == CollKind::Gather ? block : block * n;
    const size_t recvBytes = a.kind == CollKind::Scatter ? block : block * n;
    const bool both = a.kind == CollKind::AllToAll || a.root == comm->rank;  // elsewhere one buffer is unused
    const bool layout = both && (a.kind == CollKind::AllToAll ? send == recv
                                 : a.kind == CollKind::Gather ? send == recv + comm->rank * block
                                                              : recv == send + comm->rank * block);
    if (both && !layout && rangesOverlap(send, sendBytes, recv, recvBytes)) {
      NCCLCHECK(devStagingCopy(comm, send, sendBytes, s, keep));
      w.send = keep->get();
    }
  }
  size_t total = a.count * esize;
  if (a.kind != CollKind::AllReduce && a.kind != CollKind::Broadcast && a.kind != CollKind::Reduce) total *= n;
  w.nChannels = static_cast<int>(std::max<size_t>(1, std::min<size_t>((total + kBytesPerChannel - 1) / kBytesPerChannel,
                                                                      d.nChannels)));
  w.nChannelsConn = d.nChannels;
  w.sendCh = d.ringSend->devTable();  // the direct algorithm watches their abort flags
  w.recvCh = d.ringRecv->devTable();
  if (!w.sendCh || !w.recvCh) return ncclInternalError;
  // Direct: every rank in this process; or ranks in several processes whose
  // kernels decide at run time between direct and the ring, by where the
  // buffers are mapped.
  int blocks = w.nChannels;
  if (d.direct || d.share) {
    if (d.direct) {
      for (int k = 0; k < n; ++k) w.slots[k] = d.direct + k;
    } else {
      const size_t sendBytes = a.kind == CollKind::ReduceScatter ? total : a.count * esize;
      const size_t recvBytes = a.kind == CollKind::AllGather ? total : a.count * esize;
      rmaDevDirect(comm, rmaDevOf(comm), &w, sendBytes, recvBytes);
      devSharePrepare(comm, d.share.get(), &w, sendBytes, recvBytes, capturing(s));
    }
    // Blocks split each rank's part (total / n bytes; all-to-all: its whole
    // buffer, half of each pair's blocks); every rank runs as many.
    const size_t perRank = a.kind == CollKind::AllToAll ? total : total / n;
    const int direct = static_cast<int>(std::max<size_t>(1, std::min<size_t>((perRank + kDirectBytesPerBlock - 1) /
                                                                                 kDirectBytesPerBlock, d.directBlocks)));
    if (d.direct) w.nChannels = direct;
    blocks = std::max(direct, w.nChannels);  // the ring, if the ranks agree on it, runs on the first nChannels
  }
  *blocksOut = blocks;
  return ncclSuccess;
}

// The capture sequence a stream records into: 0 for none, ~0 where it cannot
// be told (or the capture was invalidated).
unsigned long long captureOf(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (cudaStreamGetCaptureInfo(s, &st, &id) != cudaSuccess) {
    (void)cudaGetLastError();
    return ~0ull;
  }
  return st == cudaStreamCaptureStatusNone ? 0 : st == cudaStreamCaptureStatusActive ? id + 1 : ~0ull;
}

// One rank's part of a group that runs as one launch (devRunTogether).
struct Part {
  ncclComm* comm;
  const std::vector<CollArgs>* ops;
  cudaStream_t stream() const { return static_cast<cudaStream_t>((*ops)[0].stream); }
};

// Whether the parts' streams are all in one capture or in none (a graph per
// stream, as nccl-tests' -G captures, holds each rank's own launch: an event
// from another capture would join the two); *captured: in one.
bool oneCapture(const std::vector<Part>& parts, bool* captured) {
  const unsigned long long capture = captureOf(parts[0].stream());
  if (capture == ~0ull) return false;
  for (const Part& p : parts)
    if (p.stream() != parts[0].stream() && captureOf(p.stream()) != capture) return false;
  *captured = capture != 0;
  return true;
}

// Whether these collectives, one per rank of one communicator whose ranks
// all live in this process on one GPU, are alike: the same collective,
// datatype, op, root and count.
bool collsAlike(const std::vector<Part>& parts) {
  const CollArgs& a = (*parts[0].ops)[0];
  for (const Part& p : parts) {
    const CollArgs& c = (*p.ops)[0];
    if (p.ops->size() != 1 || isP2p(c.kind) || c.kind != a.kind || c.type != a.type ||
        devOpOf(c.red.kind) != devOpOf(a.red.kind) || c.root != a.root || c.count != a.count)
      return false;
  }
  return true;
}

// Whether these groups of sends and receives (parts in rank order: every
// rank of the communicator) form a permutation that one launch moves
// (coll/permutation.h): each with one send and one receive on one stream.
// Fills *w.
bool permutation(const std::vector<Part>& parts, DevPermWork* w) {
  const int n = parts[0].comm->nranks;
  if (static_cast<int>(parts.size()) != n) return false;
  std::vector<RankSendRecv> ranks(n);
  for (int k = 0; k < n; ++k) {
    const std::vector<CollArgs>& ops = *parts[k].ops;
    if (parts[k].comm->rank != k || ops.size() != 2 || ops[0].kind == ops[1].kind || ops[0].stream != ops[1].stream)
      return false;
    RankSendRecv& r = ranks[k];
    for (const CollArgs& a : ops) {
      if (!isP2p(a.kind)) return false;
      const size_t bytes = a.count * typeSize(a.type);
      if (a.kind == CollKind::Send) {
        r.sendTo = a.root;
        r.sendBytes = bytes;
        r.send = a.sendbuff;
      } else {
        r.recvFrom = a.root;
        r.recvBytes = bytes;
        r.recv = a.recvbuff;
      }
    }
    const std::vector<bool>& direct = parts[k].comm->dev->p2pDirect;
    r.direct = r.sendTo >= 0 && r.sendTo < static_cast<int>(direct.size()) && direct[r.sendTo];
  }
  if (!formsPermutation(ranks)) return false;
  for (int k = 0; k < n; ++k) {
    w->send[k] = static_cast<const char*>(ranks[k].send);
    w->to[k] = static_cast<char*>(const_cast<void*>(ranks[ranks[k].sendTo].recv));
  }
  w->n = n;
  w->bytes = ranks[0].sendBytes;
  return true;
}

// Enqueues `launch(s0)` on s0, the first part's stream: s0 first waits for
// every other part's stream (and each communicator's earlier work) through
// that communicator's join event, and every other stream then waits for the
// launch through the first one's. Outside a capture (`cap`: the streams are
// in one) every communicator then records its last event on its own stream,
// as ordered() does.
template <typename Launch>
ncclResult_t enqueueTogether(const std::vector<Part>& parts, bool cap, Launch launch) {
  ncclComm* comm0 = parts[0].comm;
  const cudaStream_t s0 = parts[0].stream();
  cudaError_t e = cudaSuccess;
  auto note = [&e](cudaError_t r) {
    if (e == cudaSuccess) e = r;
  };
  for (const Part& p : parts) {
    NCCLCHECK(afterPrevious(p.comm, p.stream()));
    if (p.stream() == s0) continue;
    note(cudaEventRecord(p.comm->dev->joinEvent, p.stream()));
    note(cudaStreamWaitEvent(s0, p.comm->dev->joinEvent, 0));
  }
  (void)cudaGetLastError();  // the launch reports cudaGetLastError(): not an earlier call's error
  if (e == cudaSuccess) note(launch(s0));
  // comm0's join event is free: its stream is s0.
  cudaEvent_t done = comm0->dev->joinEvent;
  note(cudaEventRecord(done, s0));
  for (const Part& p : parts) {
    if (p.stream() != s0) note(cudaStreamWaitEvent(p.stream(), done, 0));
    if (cap) continue;
    DevState& d = *p.comm->dev;
    if (const cudaError_t r = cudaEventRecord(d.lastEvent, p.stream()); r == cudaSuccess) {
      d.lastStream = p.stream();
      d.haveLast = true;
    } else {
      note(r);  // the previous last event stays: it still orders what came before
    }
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    // A stream that could not wait for the launch must not free its staging
    // copy, nor go on, under the kernel: wait for it here (it has no waits
    // of its own), where it was enqueued.
    if (!cap) (void)cudaStreamSynchronize(s0);
    (void)cudaGetLastError();
    WARN("%s (%s, rank %d and %zu more of this process): enqueueing their one launch failed: %s",
         (*parts[0].ops)[0].opName, comm0->name.c_str(), comm0->rank, parts.size() - 1, cudaGetErrorString(e));
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

// One launch of the collectives of `parts` (every rank in rank order;
// collsAlike said so).
ncclResult_t launchColls(const std::vector<Part>& parts, bool captured) {
  DevFusedWork f{};
  std::vector<std::shared_ptr<void>> keep(parts.size());  // let go after the streams wait for the launch
  for (size_t i = 0; i < parts.size(); ++i) {
    const CollArgs& a = (*parts[i].ops)[0];
    DevCollWork w = baseWork(a);
    int blocks = 0;
    NCCLCHECK(collWork(a, &w, &blocks, &keep[i]));
    if (i == 0) {
      f.w = w;
      f.blocksPerRank = blocks;
    } else if (blocks != f.blocksPerRank) {  // the same sizes on one table: cannot differ
      WARN("%s (%s): ranks %d and %d of one group launch differ in blocks (%d, %d)", a.opName,
           parts[0].comm->name.c_str(), parts[0].comm->rank, parts[i].comm->rank, f.blocksPerRank, blocks);
      return ncclInternalError;
    }
    f.parts[i] = DevRankPart{w.send, w.recv, w.scalarF, w.scalarI, w.scalarPtr};
  }
  return enqueueTogether(parts, captured, [&](cudaStream_t s0) { return devLaunchFused(f, s0); });
}

}  // namespace

ncclResult_t devRunCollective(const CollArgs& a) {
  ncclComm* comm = a.comm;
  DevState& d = *comm->dev;
  cudaStream_t s = static_cast<cudaStream_t>(a.stream);
  CUDACHECK(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm);
  DevCollWork w = baseWork(a);
  if (comm->nranks == 1) {
    // Arithmetic on one rank is only PreMulSum's scaling; the rest is a copy (none in place).
    const bool arithmetic = w.op == DevOp::PreMulSum;
    if (!arithmetic && a.sendbuff == a.recvbuff) return ncclSuccess;
    const size_t bytes = a.count * typeSize(a.type);
    if (!arithmetic) {  // the runtime's device-to-device copy is the fastest there is
      CUDACHECK(cudaMemcpyAsync(a.recvbuff, a.sendbuff, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync", comm);
      return ncclSuccess;
    }
    w.coll = DevColl::Local;
    const size_t perBlock = static_cast<size_t>(kDevThreads) * 16 * 4;
    int blocks = static_cast<int>(std::min<size_t>((bytes + perBlock - 1) / perBlock, d.smCount * 4));
    w.nChannels = std::max(1, blocks);
    cudaError_t e = devLaunchColl(w, w.nChannels, s);
    if (e != cudaSuccess) return cudaCheck(e, "kernel launch", comm);
    return ncclSuccess;
  }
  if (comm->nhosts > 1 && !d.netRing) return devRunStaged(comm, {a});  // ACCL_NET_KERNELS=0
  std::shared_ptr<void> keep;  // a copy of the input, freed on the stream after the kernel
  int blocks = 0;
  NCCLCHECK(collWork(a, &w, &blocks, &keep));
  return ordered(comm, s, a.opName, [&] { return devLaunchColl(w, blocks, s); });
}

bool devGroupLaunch() { return paramInt(Param::GroupLaunch) != 0; }

namespace {

std::vector<Part> partsOf(const std::vector<GroupPart>& parts, const std::vector<size_t>& set) {
  std::vector<Part> group;
  for (size_t i : set) group.push_back({parts[i].first, parts[i].second});
  return group;
}

}  // namespace

std::vector<TogetherSet> devTogetherSets(const std::vector<GroupPart>& parts) {
  std::map<DevDirectSlot*, std::vector<size_t>> byTable;  // one table per communicator's clique
  for (size_t i = 0; i < parts.size(); ++i) {
    const ncclComm* comm = parts[i].first;
    if (comm->dev && comm->dev->direct && comm->nhosts == 1 && comm->nranks > 1) byTable[comm->dev->direct].push_back(i);
  }
  std::vector<TogetherSet> sets;
  for (auto& [table, indices] : byTable) {
    std::sort(indices.begin(), indices.end(),
              [&](size_t x, size_t y) { return parts[x].first->rank < parts[y].first->rank; });
    // Every rank, once: a launch of some would wait in the slots for ranks
    // that other threads drive, after this group's later parts on its streams.
    bool every = static_cast<int>(indices.size()) == parts[indices[0]].first->nranks;
    for (size_t k = 0; k < indices.size(); ++k) every = every && parts[indices[k]].first->rank == static_cast<int>(k);
    if (!every) continue;
    TogetherSet set;
    const std::vector<Part> group = partsOf(parts, indices);
    if (!oneCapture(group, &set.captured)) continue;
    set.permutation = !collsAlike(group);
    if (set.permutation && !permutation(group, &set.perm)) continue;
    set.parts = std::move(indices);
    sets.push_back(std::move(set));
  }
  return sets;
}

ncclResult_t devRunTogether(const std::vector<GroupPart>& parts, const TogetherSet& set) {
  const std::vector<Part> group = partsOf(parts, set.parts);
  ncclComm* comm0 = group[0].comm;
  CUDACHECK(cudaSetDevice(comm0->cudaDev), "cudaSetDevice", comm0);
  const int most = comm0->dev->smCount * 2;  // permutation blocks
  const ncclResult_t r =
      set.permutation
          ? enqueueTogether(group, set.captured, [&](cudaStream_t s0) { return devLaunchPermute(set.perm, most, s0); })
          : launchColls(group, set.captured);
  DevState& d = *comm0->dev;
  if (r == ncclSuccess && !d.toldGroupLaunch) {  // once per rank whose stream launches
    d.toldGroupLaunch = true;
    INFO(kColl, "%s rank %d: a group's %s of %zu ranks of this process runs as one launch on this rank's stream",
         comm0->name.c_str(), comm0->rank, (*group[0].ops)[0].opName, group.size());
  }
  return r;
}

bool devDirectSendRecvColls(const ncclComm* comm) { return comm->dev && comm->dev->direct; }

void devRegister(ncclComm* comm, Registration* reg) {
  if (!comm->dev || !comm->dev->share || !devBuffer(reg->buff)) return;
  if (cudaSetDevice(comm->cudaDev) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  devShareRegister(comm, comm->dev->share.get(), reg);
}

ncclResult_t devDeregister(ncclComm* comm, Registration* reg) {
  if (!comm->dev || !comm->dev->share) return ncclSuccess;
  return devShareDeregister(comm, comm->dev->share.get(), reg);
}

ncclResult_t devMemAlloc(void** ptr, size_t size) {
  cudaError_t e = cudaMalloc(ptr, size);
  if (e == cudaSuccess) return ncclSuccess;
  (void)cudaGetLastError();
  *ptr = nullptr;
  WARN("ncclMemAlloc: cannot allocate %zu bytes of device memory: %s", size, cudaGetErrorString(e));
  return ncclUnhandledCudaError;
}

bool devMemFree(void* ptr) {
  if (!devBuffer(ptr)) return false;
  (void)cudaFree(ptr);
  (void)cudaGetLastError();
  return true;
}

bool devQueuesOnly(const ncclComm* comm, const std::vector<CollArgs>& ops) {
  if (!comm->dev) return false;
  for (const CollArgs& a : ops) {
    if (!a.onDevice) return false;
    if (comm->nhosts > 1) continue;  // staged: queued on the stream, run by the proxy
    if (!isP2p(a.kind) || a.root == comm->rank) continue;  // collectives use the ring made at setup
    std::lock_guard<std::recursive_mutex> lock(const_cast<ncclComm*>(comm)->connMu);
    const auto& conns = a.kind == CollKind::Send ? comm->sendConns : comm->recvConns;
    if (!conns.count({a.root, kTagDevP2p})) return false;
  }
  return true;
}

ncclResult_t devStagingCopy(ncclComm* comm, const void* src, size_t bytes, void* stream, std::shared_ptr<void>* out) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  CUDACHECK(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm);
  NCCLCHECK(afterPrevious(comm, s));  // the input may be the output of the communicator's last call
  void* p = nullptr;
  CUDACHECK(cudaMallocAsync(&p, bytes, s), "cudaMallocAsync (staging copy)", comm);
  out->reset(p, [s](void* q) {
    (void)cudaFreeAsync(q, s);
    (void)cudaGetLastError();
  });
  CUDACHECK(cudaMemcpyAsync(p, src, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync (staging copy)", comm);
  return ncclSuccess;
}

ncclResult_t devRunP2p(ncclComm* comm, const std::vector<CollArgs>& ops) {
  DevState& d = *comm->dev;
  const char* opName = ops[0].opName;
  cudaStream_t s = static_cast<cudaStream_t>(ops[0].stream);
  for (const CollArgs& a : ops) {
    if (a.stream != ops[0].stream) {
      WARN("%s (%s, rank %d): the sends and receives of one group must use one stream on a communicator",
           a.opName, comm->name.c_str(), comm->rank);
      return ncclInvalidUsage;
    }
  }
  CUDACHECK(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm);
  if (comm->nhosts > 1) return devRunStaged(comm, ops);  // no point-to-point device connectors between hosts
  std::vector<const CollArgs*> selfSends, selfRecvs;
  std::vector<int> sendPeers, recvPeers;
  for (const CollArgs& a : ops) {
    bool send = a.kind == CollKind::Send;
    if (a.root == comm->rank) {
      (send ? selfSends : selfRecvs).push_back(&a);
      continue;
    }
    auto& peers = send ? sendPeers : recvPeers;
    if (std::find(peers.begin(), peers.end(), a.root) == peers.end()) peers.push_back(a.root);
  }
  if (selfSends.size() != selfRecvs.size()) {
    WARN("%s (%s, rank %d): %zu send(s) to self but %zu receive(s) from self in one group", opName,
         comm->name.c_str(), comm->rank, selfSends.size(), selfRecvs.size());
    return ncclInvalidUsage;
  }
  std::vector<Connection*> sends, recvs;
  NCCLCHECK(getConnections(comm, sendPeers, recvPeers, kTagDevP2p, &sends, &recvs));
  // A send whose buffer a receive of the group writes (sendrecv in place)
  // sends from a copy made first on the stream, so it sends what the buffer
  // held before the group, however the two ends' copies interleave. The
  // copies are freed on the stream after the kernel, which ends only once
  // its sends were taken.
  std::map<const CollArgs*, std::shared_ptr<void>> staged;
  std::map<const CollArgs*, const CollArgs*> selfPair;  // a send to self: the receive it is matched with
  for (size_t i = 0; i < selfSends.size(); ++i) selfPair[selfSends[i]] = selfRecvs[i];
  for (const CollArgs& a : ops) {
    if (a.kind != CollKind::Send) continue;
    const size_t bytes = a.count * typeSize(a.type);
    for (const CollArgs& b : ops) {
      if (b.kind != CollKind::Recv || !rangesOverlap(a.sendbuff, bytes, b.recvbuff, b.count * typeSize(b.type)))
        continue;
      auto pair = selfPair.find(&a);
      if (pair != selfPair.end() && pair->second == &b && a.sendbuff == b.recvbuff) continue;  // in place: no copy

      NCCLCHECK(devStagingCopy(comm, a.sendbuff, bytes, s, &staged[&a]));
      break;
    }
  }
  auto sendFrom = [&](const CollArgs& a) {
    auto it = staged.find(&a);
    return it != staged.end() ? static_cast<const char*>(it->second.get()) : static_cast<const char*>(a.sendbuff);
  };

  // A send or receive larger than its channels' slots hold copies between the
  // buffers where the peer allows it (d.p2pDirect, from p2pDirectPeer at
  // setup): every byte read and written once, not through the slots. Smaller
  // ones keep the slots, so that a send that fits still completes before its
  // receiver runs (the two ends decide alike from the same size;
  // docs/design.md, "Direct sends", says which sizes that differ are caught).
  auto direct = [&](int peer, size_t bytes, int nch) {
    return d.p2pDirect[peer] && bytes > static_cast<size_t>(nch) * kSlots * comm->slotBytes;
  };
  // A direct send or receive has its own slices: a power of two of them, up
  // to the connector's channels, that both ends agree on from the size alone;
  // each end runs them on as many blocks as its group leaves it (below).
  auto directChans = [&](size_t bytes) {
    return pow2Floor(static_cast<int>(std::min<size_t>(d.nChannels, (bytes + kP2pBytesPerChannel - 1) /
                                                                        kP2pBytesPerChannel)));
  };
  DevP2pWork w{};
  w.ctx = ctxOf(comm);
  w.nChannelsConn = d.nChannels;
  std::map<std::pair<int, int>, int> entryOf;  // (peer, isSend) -> entry
  auto chans = [&](size_t bytes) {
    return static_cast<int>(std::max<size_t>(1, std::min<size_t>((bytes + kP2pBytesPerChannel - 1) / kP2pBytesPerChannel,
                                                                 d.p2pChannels)));
  };
  auto add = [&](const DevP2pOp& op) -> ncclResult_t {
    if (w.nOps == kDevMaxP2pOps) {
      WARN("%s (%s, rank %d): more than %d device sends and receives in one group are not supported yet",
           opName, comm->name.c_str(), comm->rank, kDevMaxP2pOps);
      return ncclInvalidUsage;
    }
    w.ops[w.nOps++] = op;
    return ncclSuccess;
  };
  for (size_t i = 0; i < selfSends.size(); ++i) {
    size_t bytes = selfSends[i]->count * typeSize(selfSends[i]->type);
    if (bytes != selfRecvs[i]->count * typeSize(selfRecvs[i]->type)) {
      WARN("ncclSend/ncclRecv (%s, rank %d): send to self of %zu bytes matched with a receive of %zu bytes",
           comm->name.c_str(), comm->rank, bytes, selfRecvs[i]->count * typeSize(selfRecvs[i]->type));
      return ncclInvalidUsage;
    }
    if (selfSends[i]->sendbuff == selfRecvs[i]->recvbuff) continue;
    DevP2pOp op{};
    op.buf = static_cast<char*>(selfRecvs[i]->recvbuff);
    op.src = sendFrom(*selfSends[i]);
    op.bytes = bytes;
    op.peer = comm->rank;
    op.entry = -1;  // every block copies a share (p2pKernel)
    w.selfBytes += bytes;
    NCCLCHECK(add(op));
  }
  for (const CollArgs& a : ops) {
    if (a.root == comm->rank) continue;
    const bool send = a.kind == CollKind::Send;
    DevP2pOp op{};
    op.buf = send ? const_cast<char*>(sendFrom(a)) : static_cast<char*>(a.recvbuff);
    op.bytes = a.count * typeSize(a.type);
    op.peer = a.root;
    op.isSend = send;
    op.nChannels = chans(op.bytes);
    op.direct = direct(a.root, op.bytes, op.nChannels);
    if (op.direct) op.nChannels = directChans(op.bytes);
    const auto& peers = send ? sendPeers : recvPeers;
    Connection* c = (send ? sends : recvs)[std::find(peers.begin(), peers.end(), a.root) - peers.begin()];
    op.ch = c->devTable();
    if (!op.ch) return ncclInternalError;
    auto key = std::make_pair(a.root, send ? 1 : 0);
    if (!entryOf.count(key)) entryOf[key] = w.nEntries++;
    op.entry = entryOf[key];
    NCCLCHECK(add(op));
  }
  if (w.nOps == 0) return ncclSuccess;
  // Blocks per entry: the rank's channels shared among the group's entries
  // (rounded down to a power of two, so that direct slices divide evenly),
  // at least the share a send or receive on the slots takes, and no more
  // than the group's largest operation uses (so not always a power of two:
  // then only the balance between blocks suffers). Copies to self get at
  // least as many blocks as a direct send of their size.
  int most = 1;
  for (int i = 0; i < w.nOps; ++i)
    if (w.ops[i].entry >= 0) most = std::max(most, w.ops[i].nChannels);
  w.chansPerEntry = 1;
  if (w.nEntries > 0)
    w.chansPerEntry = std::min(most, std::max(d.p2pChannels, pow2Floor(d.nChannels / w.nEntries)));
  // Blocks past the entries' (their entry matches no operation) only copy to self.
  w.nBlocks = std::max(w.nEntries * w.chansPerEntry, w.selfBytes > 0 ? directChans(w.selfBytes) : 1);
  return ordered(comm, s, opName, [&] { return devLaunchP2p(w, s); });
}

}  // namespace accl

#else  // built without the CUDA executor: no communicator is ever in device mode

namespace accl {

struct DevState {};
void DevStateDeleter::operator()(DevState* d) const { delete d; }
int devChoose(int) { return -1; }
ncclResult_t devProbe(ncclComm*, PeerInfo*) { return ncclInternalError; }
ncclResult_t devSetup(ncclComm*) { return ncclInternalError; }
void devStop(ncclComm*) {}
void devStopWatch(ncclComm*) {}
void devStopKernels(ncclComm*) {}
bool devBuffer(const void*) { return false; }
bool devRangeInside(const void*, size_t, size_t*) { return true; }
ncclResult_t devReadScalar(const CollArgs&, void*, bool* copied) {
  *copied = false;
  return ncclSuccess;
}
ncclResult_t devRunCollective(const CollArgs&) { return ncclInternalError; }
bool devGroupLaunch() { return false; }
std::vector<TogetherSet> devTogetherSets(const std::vector<GroupPart>&) { return {}; }
ncclResult_t devRunTogether(const std::vector<GroupPart>&, const TogetherSet&) { return ncclInternalError; }
ncclResult_t devRunP2p(ncclComm*, const std::vector<CollArgs>&) { return ncclInternalError; }
ncclResult_t devStagingCopy(ncclComm*, const void*, size_t, void*, std::shared_ptr<void>*) { return ncclInternalError; }
bool devQueuesOnly(const ncclComm*, const std::vector<CollArgs>&) { return false; }
bool devDirectSendRecvColls(const ncclComm*) { return false; }
ncclResult_t devMemAlloc(void**, size_t) { return ncclInternalError; }
void devRegister(ncclComm*, Registration*) {}
ncclResult_t devDeregister(ncclComm*, Registration*) { return ncclSuccess; }
bool devMemFree(void*) { return false; }
ncclResult_t devCheck(ncclComm* comm) { return static_cast<ncclResult_t>(comm->asyncError.load()); }
ncclResult_t devWait(ncclComm*) { return ncclSuccess; }

}  // namespace accl
#endif
