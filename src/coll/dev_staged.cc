// Device buffers between hosts: an operation is staged through pinned host
// memory and run by the host executor (sockets between hosts, shm within one)
// on the communicator's proxy thread, in the order of the caller's stream:
//
//   stream:  copy inputs device -> staging | hand the job to the proxy |
//            wait kernel (spins on the job's done flag) | copy staging -> outputs
//   proxy:   runs the host collective or p2p batch on the staging buffers,
//            then sets the done flag (1 done, 2 failed)
//
// The hand-over is a host function (cudaLaunchHostFunc) that only queues the
// job: it must not wait, since CUDA runs every stream's host functions on one
// thread, and two ranks of one process would wait for each other there. The
// waiting is the wait kernel's, which checks the deadline like every kernel.
//
// A communicator's operations run one after another (dev_state.h's ordered()),
// so eager operations share one staging buffer and one done flag. A captured
// operation is replayed later, so it gets its own buffer and flag, kept until
// the communicator goes. Captured jobs are replayed as they are: a graph replay
// stages the same buffers again.
#ifdef ACCL_HAVE_DEVICE_PATH
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "coll/coll.h"
#include "coll/dev_state.h"
#include "device/dev_launch.h"

namespace accl {

namespace {

constexpr uint32_t kPending = 0, kDone = 1, kFailed = 2;
constexpr int kFlagsPerChunk = 1024;
constexpr size_t kAlign = 256;

size_t alignUp(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// One staged operation: what the proxy runs, on host pointers into `stage`.
struct StageJob {
  Stager* stager;
  std::vector<CollArgs> hostOps;  // one collective, or one communicator's sends and receives
  StagedCall call;                // or this (a one-sided put), on `callInput`
  const char* callInput = nullptr;
  const char* opName = nullptr;
  volatile uint32_t* done;        // host-mapped
  bool persistent;                // captured: replayed, never freed before the communicator
};

// The stream-side copies of a job.
struct Copy {
  void* dst;
  const void* src;
  size_t bytes;
};

thread_local bool tlsOnProxy = false;  // this thread is a stager's proxy

// Allocations while the caller's stream is being captured: pinned memory is
// not stream work, so allow it in any capture mode for the guard's lifetime.
class RelaxedCapture {
 public:
  RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

}  // namespace

class Stager {
 public:
  explicit Stager(ncclComm* comm) : comm_(comm) { thread_ = std::thread([this] { loop(); }); }
  ~Stager();  // frees the pinned memory; only once stop() allowed it

  ncclResult_t run(const std::vector<CollArgs>& ops);
  ncclResult_t run(cudaStream_t s, const void* src, size_t bytes, StagedCall call, const char* opName);
  // Stops the proxy and fails the jobs it has not run. False when a stream or
  // a captured graph may still hand it jobs: then it must never be freed.
  bool stop();

 private:
  static void CUDART_CB kick(void* job);
  void loop();
  ncclResult_t flag(bool persistent, volatile uint32_t** host, const uint32_t** dev);
  // Queues `job` on `s` between the copies in and out (dev_state.h's ordered()).
  ncclResult_t enqueue(cudaStream_t s, std::unique_ptr<StageJob> job, const uint32_t* doneDev,
                       const std::vector<Copy>& before, const std::vector<Copy>& after);
  ncclResult_t buffer(size_t bytes, bool persistent, char** out);

  ncclComm* comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StageJob*> queue_;  // guarded by mu_
  bool stopped_ = false;         // guarded by mu_
  uint64_t issued_ = 0;          // eager jobs put on a stream (guarded by mu_)
  uint64_t kicked_ = 0;          // ... whose host function ran (guarded by mu_)
  std::thread thread_;

  // Pinned memory. Flags come in chunks; flag 0 of the first chunk is the
  // eager jobs'. Staging: one growable buffer for eager jobs (outgrown ones are
  // kept, an operation on a stream may still use them), one per captured job.
  std::vector<uint32_t*> flagChunks_;
  int flagsUsed_ = 0;
  char* eager_ = nullptr;
  size_t eagerBytes_ = 0;
  std::vector<void*> pinned_;  // every staging buffer, freed with the stager
  std::vector<std::unique_ptr<StageJob>> persistent_;
};

void CUDART_CB Stager::kick(void* p) {
  auto* job = static_cast<StageJob*>(p);
  Stager* st = job->stager;
  std::lock_guard<std::mutex> lock(st->mu_);
  if (!job->persistent) ++st->kicked_;
  if (st->stopped_) {  // the communicator is going: fail the job, its wait kernel leaves
    *job->done = kFailed;
    if (!job->persistent) delete job;
    return;
  }
  *job->done = kPending;
  st->queue_.push_back(job);
  st->cv_.notify_one();
}

void Stager::loop() {
  tlsOnProxy = true;
  for (;;) {
    StageJob* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopped_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = queue_.front();
      queue_.pop_front();
    }
    ncclResult_t r = ncclSuccess;
    {
      CommUse use(comm_);
      if (job->call) {
        r = job->call(job->callInput);
      } else {
        const CollArgs& first = job->hostOps[0];
        r = isP2p(first.kind) ? runP2p(comm_, job->hostOps) : runCollective(first);
      }
    }
    if (r != ncclSuccess) {
      WARN("%s (%s, rank %d): the staged operation on device buffers failed on the proxy (%s)", job->opName,
           comm_->name.c_str(), comm_->rank, pncclGetErrorString(r));
      commSetError(comm_, r);
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);  // the outputs before the flag
    *job->done = r == ncclSuccess ? kDone : kFailed;
    if (!job->persistent) delete job;
  }
}

bool Stager::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    for (StageJob* job : queue_) {
      *job->done = kFailed;
      if (!job->persistent) delete job;
    }
    queue_.clear();
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (issued_ == kicked_ && persistent_.empty()) return true;
  // Host functions still queued on a stream (or in a graph that may be
  // replayed) reach this stager through their jobs; they find it stopped and
  // fail their jobs, so the wait kernels leave. Nothing they touch may be freed.
  INFO(kInit, "%s rank %d: keeping the staging memory of a destroyed communicator (%llu operation(s) still queued, "
       "%zu captured)", comm_->name.c_str(), comm_->rank, static_cast<unsigned long long>(issued_ - kicked_),
       persistent_.size());
  return false;
}

Stager::~Stager() {
  for (void* p : pinned_) (void)cudaFreeHost(p);
  for (uint32_t* c : flagChunks_) (void)cudaFreeHost(c);
  (void)cudaGetLastError();
}

void StagerDeleter::operator()(Stager* s) const {
  if (s->stop()) delete s;
}

ncclResult_t Stager::flag(bool persistent, volatile uint32_t** host, const uint32_t** dev) {
  RelaxedCapture relaxed;
  int index = 0;
  if (persistent || flagChunks_.empty()) {
    if (flagChunks_.empty() || flagsUsed_ == kFlagsPerChunk) {
      void* p = nullptr;
      CUDACHECK(cudaHostAlloc(&p, kFlagsPerChunk * sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable),
                "cudaHostAlloc (staging flags)", comm_);
      memset(p, 0, kFlagsPerChunk * sizeof(uint32_t));
      flagChunks_.push_back(static_cast<uint32_t*>(p));
      flagsUsed_ = flagChunks_.size() == 1 ? 1 : 0;  // flag 0 of the first chunk is the eager one
    }
    if (persistent) index = flagsUsed_++;
  }
  uint32_t* h = persistent ? flagChunks_.back() + index : flagChunks_.front();
  void* d = nullptr;
  CUDACHECK(cudaHostGetDevicePointer(&d, h, 0), "cudaHostGetDevicePointer (staging flag)", comm_);
  *host = h;
  *dev = static_cast<const uint32_t*>(d);
  return ncclSuccess;
}

ncclResult_t Stager::buffer(size_t bytes, bool persistent, char** out) {
  if (!persistent && bytes <= eagerBytes_) {
    *out = eager_;
    return ncclSuccess;
  }
  if (!persistent) bytes = std::max(bytes, 2 * eagerBytes_);  // grow geometrically
  RelaxedCapture relaxed;
  void* p = nullptr;
  CUDACHECK(cudaHostAlloc(&p, std::max<size_t>(bytes, kAlign), cudaHostAllocPortable),
            "cudaHostAlloc (staging buffer)", comm_);
  pinned_.push_back(p);
  *out = static_cast<char*>(p);
  if (!persistent) {
    eager_ = *out;
    eagerBytes_ = bytes;
  }
  return ncclSuccess;
}

// Lays out the job's staging buffer: each operation's input (copied in before
// the proxy runs) and output (copied out after), and the host arguments.
ncclResult_t Stager::run(const std::vector<CollArgs>& ops) {
  ncclComm* comm = comm_;
  cudaStream_t s = static_cast<cudaStream_t>(ops[0].stream);
  const bool persistent = capturing(s);
  const int n = comm->nranks, me = comm->rank;

  struct Part {
    size_t in = 0, out = 0;  // bytes
    bool copyIn = false, copyOut = false;
    size_t inOff = 0, outOff = 0, scalarOff = 0;
  };
  std::vector<Part> parts(ops.size());
  size_t total = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const CollArgs& a = ops[i];
    Part& p = parts[i];
    const size_t bytes = a.count * typeSize(a.type);
    switch (a.kind) {
      case CollKind::AllReduce: p.in = p.out = bytes; break;
      case CollKind::Broadcast: p.in = a.root == me ? bytes : 0; p.out = bytes; break;
      case CollKind::Reduce: p.in = bytes; p.out = bytes; break;
      case CollKind::AllGather: p.in = bytes; p.out = bytes * n; break;
      case CollKind::ReduceScatter: p.in = bytes * n; p.out = bytes; break;
      case CollKind::Send: p.in = bytes; break;
      case CollKind::Recv: p.out = bytes; break;
    }
    p.copyIn = p.in > 0;
    // A reduce's output is only the root's (elsewhere recvbuff may be anything).
    p.copyOut = p.out > 0 && (a.kind != CollKind::Reduce || a.root == me);
    if (a.deviceScalar) {
      p.scalarOff = total;
      total += kAlign;
    }
    p.inOff = total;
    total += alignUp(p.in);
    p.outOff = total;
    total += alignUp(p.out);
  }
  char* stage = nullptr;
  NCCLCHECK(buffer(total, persistent, &stage));
  auto job = std::make_unique<StageJob>();
  job->stager = this;
  job->persistent = persistent;
  const uint32_t* doneDev = nullptr;
  NCCLCHECK(flag(persistent, &job->done, &doneDev));

  std::vector<Copy> before, after;
  for (size_t i = 0; i < ops.size(); ++i) {
    const CollArgs& a = ops[i];
    const Part& p = parts[i];
    CollArgs h = a;
    h.onDevice = false;
    h.stream = nullptr;
    h.keep.reset();
    h.sendbuff = stage + p.inOff;
    h.recvbuff = stage + p.outOff;
    if (a.kind == CollKind::Broadcast && a.root != me) h.sendbuff = h.recvbuff;
    if (a.deviceScalar) {  // PreMulSum's device scalar, read when the operation runs
      before.push_back({stage + p.scalarOff, a.deviceScalar, typeSize(a.type)});
      h.deviceScalar = stage + p.scalarOff;
    }
    if (p.copyIn) before.push_back({stage + p.inOff, a.sendbuff, p.in});
    if (p.copyOut) after.push_back({a.recvbuff, stage + p.outOff, p.out});
    job->hostOps.push_back(h);
  }
  job->opName = ops[0].opName;
  return enqueue(s, std::move(job), doneDev, before, after);
}

// A call on `bytes` of `src`, copied into staging first (a one-sided put).
ncclResult_t Stager::run(cudaStream_t s, const void* src, size_t bytes, StagedCall call, const char* opName) {
  const bool persistent = capturing(s);
  char* stage = nullptr;
  NCCLCHECK(buffer(bytes, persistent, &stage));
  auto job = std::make_unique<StageJob>();
  job->stager = this;
  job->persistent = persistent;
  job->call = std::move(call);
  job->callInput = stage;
  job->opName = opName;
  const uint32_t* doneDev = nullptr;
  NCCLCHECK(flag(persistent, &job->done, &doneDev));
  std::vector<Copy> before;
  if (bytes) before.push_back({stage, src, bytes});
  return enqueue(s, std::move(job), doneDev, before, {});
}

ncclResult_t Stager::enqueue(cudaStream_t s, std::unique_ptr<StageJob> job, const uint32_t* doneDev,
                             const std::vector<Copy>& before, const std::vector<Copy>& after) {
  ncclComm* comm = comm_;
  const bool persistent = job->persistent;
  StageJob* raw = job.get();
  DevCtx ctx = ctxOf(comm);
  bool handedOver = false;  // once its host function is queued, the job is the stream's
  ncclResult_t r = ordered(comm, s, raw->opName, [&]() -> cudaError_t {
    for (const Copy& c : before) {
      cudaError_t e = cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, s);
      if (e != cudaSuccess) return e;
    }
    cudaError_t e = cudaLaunchHostFunc(s, kick, raw);
    if (e != cudaSuccess) return e;
    handedOver = true;
    e = devLaunchStageWait(doneDev, ctx, s);
    if (e != cudaSuccess) return e;
    for (const Copy& c : after) {
      e = cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, s);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  });
  if (persistent) {
    persistent_.push_back(std::move(job));  // a graph may replay it until the communicator goes
  } else if (handedOver) {
    std::lock_guard<std::mutex> lock(mu_);
    ++issued_;
    job.release();  // freed by the proxy once it ran, or by its host function
  }
  return r;
}

ncclResult_t devRunStaged(ncclComm* comm, const std::vector<CollArgs>& ops) {
  if (ops.empty()) return ncclSuccess;  // one stream: devRunP2p checked the group's
  DevState& d = *comm->dev;
  CUDACHECK(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm);
  if (!d.stager) d.stager.reset(new Stager(comm));
  return d.stager->run(ops);
}

ncclResult_t devRunStagedCall(ncclComm* comm, void* stream, const void* src, size_t bytes, StagedCall call,
                              const char* opName) {
  DevState& d = *comm->dev;
  CUDACHECK(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm);
  if (!d.stager) d.stager.reset(new Stager(comm));
  return d.stager->run(static_cast<cudaStream_t>(stream), src, bytes, std::move(call), opName);
}

ncclResult_t devBeforeHostOp(ncclComm* comm) {
  if (!comm->dev || !comm->dev->stager || tlsOnProxy) return ncclSuccess;
  return devWait(comm);
}

}  // namespace accl

#else  // built without the CUDA executor

#include "device/dev_comm.h"

namespace accl {
ncclResult_t devRunStaged(ncclComm*, const std::vector<CollArgs>&) { return ncclInternalError; }
ncclResult_t devRunStagedCall(ncclComm*, void*, const void*, size_t, StagedCall, const char*) {
  return ncclInternalError;
}
ncclResult_t devBeforeHostOp(ncclComm*) { return ncclSuccess; }
}  // namespace accl

#endif
