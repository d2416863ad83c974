// Device buffers between hosts: an operation is staged through pinned host
// memory and run by the host executor (sockets between hosts, shm within one)
// on the communicator's proxy thread, in the order of the caller's stream:
//
//   stream:  copy inputs device -> staging | raise `go` | wait kernel (spins
//            until the proxy raises `done`) | copy staging -> outputs
//   proxy:   waits for the job's `go`, runs the host collective or p2p batch
//            on the staging buffers, then raises `done`
//
// A communicator's eager operations run one after another (dev_state.h's
// ordered()), so they share one staging buffer and one pair of host-mapped
// words: the stream writes k to `go` when it reaches operation k, and its
// kernel waits for `done` to reach k. The job is queued for the proxy when the
// call is made, and the proxy polls `go` while jobs wait: no host function on
// the stream, whose dispatch (CUDA's callback thread) cost 50 to 100 us an
// operation on the H200 (docs/gpu-baseline.md).
//
// A collective larger than the chunk the ranks agreed on (ACCL_STAGE_CHUNK_BYTES)
// is a job per chunk, each with its own k:
//
//   stream:  copy in 1 | go 1 | copy in 2 | go 2 ... | wait 1 | copy out 1 | wait 2 | copy out 2 ...
//
// so that the proxy runs chunk 1 on the network while chunk 2 is copied in,
// and chunk 2 while chunk 1 is copied out.
//
// A captured operation is replayed later, when no call queues it, so it keeps
// a host function (cudaLaunchHostFunc) that queues its job when the stream
// reaches it, and gets its own buffer and `done` word, kept until the
// communicator goes. The host function only queues: CUDA runs every stream's
// host functions on one thread, and two ranks of one process would wait for
// each other there. Captured jobs are replayed as they are: a graph replay
// stages the same buffers again.
#ifdef ACCL_HAVE_DEVICE_PATH
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <sys/prctl.h>

#include "base/errors.h"
#include "base/threads.h"
#include "base/wait.h"
#include "coll/coll.h"
#include "coll/dev_state.h"
#include "core/redop.h"
#include "device/dev_launch.h"

namespace accl {

namespace {

// A stopped stager raises every `done` word this far past its last job, so
// every wait kernel leaves.
constexpr uint64_t kStopMargin = 1ull << 40;
// The proxy polls `go` with naps this long once it has spun a while: a call
// made long before the GPU reaches it starts at most this late.
constexpr long kGoNapNs = 20000;
constexpr int kFlagsPerBlock = 512;
constexpr size_t kLine = 64;          // `go` and `done` on lines of their own
constexpr size_t kAlign = 256;

size_t alignUp(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// One staged operation: what the proxy runs, on host pointers into `stage`.
struct StageJob {
  Stager* stager;
  std::vector<CollArgs> hostOps;  // one collective, or one communicator's sends and receives
  StagedCall call;                // or this (a one-sided put), on `callInput`
  const char* callInput = nullptr;
  const char* opName = nullptr;
  uint64_t seq = 1;               // what `done` is raised to (and, eager, what the stream writes to `go`)
  volatile uint64_t* done;        // host-mapped: the eager word, or a captured job's own
  const uint64_t* doneDev;        // ... as the GPU sees it
  bool persistent;                // captured: replayed, never freed before the communicator
};

// A stream-side copy of a job: `rows` rows of `bytes`, `dstPitch` and
// `srcPitch` apart (a chunk of an allgather's output or of a reduce-scatter's
// input is a row of every rank's block).
struct Copy {
  void* dst;
  const void* src;
  size_t bytes;
  size_t rows = 1, dstPitch = 0, srcPitch = 0;
};

// One 2D copy, or a copy per row where a pitch passes what a 2D copy takes
// (cudaDevAttrMaxPitch: 2^31 - 1 on current GPUs).
cudaError_t copyAsync(const Copy& c, cudaStream_t s) {
  constexpr size_t kMaxPitch = (size_t{1} << 31) - 1;
  if (c.rows > 1 && c.dstPitch <= kMaxPitch && c.srcPitch <= kMaxPitch)
    return cudaMemcpy2DAsync(c.dst, c.dstPitch, c.src, c.srcPitch, c.bytes, c.rows, cudaMemcpyDefault, s);
  for (size_t r = 0; r < c.rows; ++r) {
    cudaError_t e = cudaMemcpyAsync(static_cast<char*>(c.dst) + r * c.dstPitch,
                                    static_cast<const char*>(c.src) + r * c.srcPitch, c.bytes, cudaMemcpyDefault, s);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// A job with the stream's copies before (into staging) and after (out of it).
struct Stage {
  std::unique_ptr<StageJob> job;
  std::vector<Copy> before, after;
};

thread_local bool tlsOnProxy = false;  // this thread is a stager's proxy

// cuStreamWriteValue64 (CUDA 12 ABI), where the driver has it: the stream
// raises `go` without a kernel. A kernel needs the GPU's compute engine, which
// a kernel of another process holds for its whole time slice when processes
// share a GPU without MPS (on the H200: 2.6 ms a staged call, against 0.3 ms
// this way). Where the driver lacks it or refuses a write, or
// ACCL_STAGE_STREAM_WRITE=0, the kernel writes `go`.
using WriteValue64 = int (*)(cudaStream_t, unsigned long long addr, uint64_t value, unsigned flags);
WriteValue64 streamWriteValue64() {
  static const WriteValue64 fn = paramInt(Param::StageStreamWrite) != 0
                                     ? reinterpret_cast<WriteValue64>(driverFunction("cuStreamWriteValue64"))
                                     : nullptr;
  return fn;
}

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
  explicit Stager(ncclComm* comm) : comm_(comm), write_(streamWriteValue64()) {
    INFO(kInit, "%s rank %d: staged operations are handed to the proxy by %s", comm->name.c_str(), comm->rank,
         write_ ? "a stream write" : "a kernel");
  }
  // The proxy thread; where it cannot start, no staged call may be queued.
  ncclResult_t start() {
    return startThread(&thread_, [this] { loop(); }, "rank %d's proxy thread of staged device operations",
                       comm_->rank);
  }
  ~Stager();  // frees the pinned memory; only once stop() allowed it

  ncclResult_t run(const std::vector<CollArgs>& ops);
  ncclResult_t runChunks(const CollArgs& a, size_t per);
  ncclResult_t run(cudaStream_t s, const void* src, size_t bytes, StagedCall call, const char* opName);
  // Stops the proxy and lets every waiting kernel leave. False when a stream
  // or a captured graph may still reach its memory: then it must never be freed.
  bool stop();

 private:
  static void CUDART_CB kick(void* job);
  void loop();
  // The next job the stream has reached, if any (called under mu_).
  StageJob* next(std::unique_ptr<StageJob>* owned);
  ncclResult_t eagerWords();
  ncclResult_t capturedDone(StageJob* job);
  // Queues the jobs on `s` between their copies in and out (dev_state.h's ordered()).
  ncclResult_t enqueue(cudaStream_t s, std::vector<Stage>& stages);
  // Raises `go` to `seq` on `s`: by a stream write, else by a kernel.
  cudaError_t handOver(cudaStream_t s, uint64_t seq, const DevCtx& ctx);
  ncclResult_t buffer(size_t bytes, bool persistent, char** out);
  bool streamPassed();

  ncclComm* comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<StageJob>> eager_;  // queued by the calls, in order (guarded by mu_)
  std::deque<StageJob*> kicked_;                 // captured jobs the stream reached (guarded by mu_)
  bool stopped_ = false;                         // guarded by mu_
  uint64_t lastSeq_ = 0;                         // of the eager jobs (guarded by mu_)
  bool announcedChunks_[2] = {false, false};  // eager, captured
  WriteValue64 write_;                           // null: a kernel writes `go` (the calls')
  std::thread thread_;

  // Pinned, host-mapped words. Eager jobs: `go` (written by the stream) and
  // `done` (by the proxy), a line apart. Captured jobs: a `done` each, from blocks of kFlagsPerBlock.
  char* eagerWords_ = nullptr;
  volatile uint64_t* go_ = nullptr;
  volatile uint64_t* done_ = nullptr;
  uint64_t* goDev_ = nullptr;
  const uint64_t* doneDev_ = nullptr;
  std::vector<uint64_t*> flagChunks_;
  int flagsUsed_ = kFlagsPerBlock;
  // Staging: one growable buffer for eager jobs (outgrown ones are kept, an
  // operation on a stream may still use them), one per captured job.
  char* eagerBuf_ = nullptr;
  size_t eagerBytes_ = 0;
  std::vector<void*> pinned_;  // every staging buffer, freed with the stager
  std::vector<std::unique_ptr<StageJob>> persistent_;
};

void CUDART_CB Stager::kick(void* p) {
  auto* job = static_cast<StageJob*>(p);  // a captured job: owned by its stager
  Stager* st = job->stager;
  std::lock_guard<std::mutex> lock(st->mu_);
  if (st->stopped_) {  // the communicator is going: its wait kernel leaves
    *job->done = kStopMargin;
    return;
  }
  *job->done = 0;
  st->kicked_.push_back(job);
  st->cv_.notify_one();
}

StageJob* Stager::next(std::unique_ptr<StageJob>* owned) {
  if (!kicked_.empty()) {
    StageJob* job = kicked_.front();
    kicked_.pop_front();
    return job;
  }
  if (eager_.empty() || __atomic_load_n(go_, __ATOMIC_ACQUIRE) < eager_.front()->seq) return nullptr;
  *owned = std::move(eager_.front());
  eager_.pop_front();
  return owned->get();
}

void Stager::loop() {
  tlsOnProxy = true;
  // The runtime calls this thread makes (the host collectives' pointer
  // checks) then use this communicator's GPU, not a new context on device 0.
  (void)cudaSetDevice(comm_->cudaDev);
  (void)cudaGetLastError();
  // This thread's naps (polling `go`, waiting on its connections) are short
  // and on the critical path: wake within a microsecond of the asked time,
  // not the default 50 us timer slack.
  (void)prctl(PR_SET_TIMERSLACK, 1000UL);
  Backoff poll;  // while the stream has not reached the next eager job: spin, then nap kGoNapNs
  for (;;) {
    std::unique_ptr<StageJob> owned;
    StageJob* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopped_ || !kicked_.empty() || !eager_.empty(); });
      if (stopped_) return;
      job = next(&owned);
    }
    if (!job) {
      if (poll.napping()) {
        struct timespec ts = {0, kGoNapNs};
        nanosleep(&ts, nullptr);
      } else {
        poll.pause();
      }
      continue;
    }
    poll.reset();
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
    if (r != ncclSuccess) {  // a later call or ncclCommGetAsyncError reports it; the kernel leaves all the same
      WARN("%s (%s, rank %d): the staged operation on device buffers failed on the proxy (%s)", job->opName,
           comm_->name.c_str(), comm_->rank, errorString(r));
      commSetError(comm_, r);
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);  // the outputs before the flag
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_)
      *job->done = job->seq;
    else if (job->persistent)  // it was running, so stop() could not raise it
      *job->done = kStopMargin;
  }
}

// Whether the stream work of this communicator's calls has all finished:
// waits up to a second (a stop() lets waiting kernels leave at once, but
// their copies out may still run).
bool Stager::streamPassed() {
  DevState& d = *comm_->dev;
  if (!d.haveLast) return true;
  for (int i = 0; i < 1000; ++i) {
    cudaError_t e = cudaEventQuery(d.lastEvent);
    if (e == cudaSuccess) return true;
    (void)cudaGetLastError();
    if (e != cudaErrorNotReady) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

bool Stager::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    for (StageJob* job : kicked_) *job->done = kStopMargin;
    kicked_.clear();
    eager_.clear();
    if (done_) *done_ = lastSeq_ + kStopMargin;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (persistent_.empty() && streamPassed()) return true;
  // Work still on a stream (or in a graph that may be replayed) reads this
  // stager's words and buffers; finding them raised for good, its kernels
  // leave. Nothing it touches may be freed.
  INFO(kInit, "%s rank %d: keeping the staging memory of a destroyed communicator (stream work not finished, "
       "%zu operation(s) captured)", comm_->name.c_str(), comm_->rank, persistent_.size());
  return false;
}

Stager::~Stager() {
  for (void* p : pinned_) (void)cudaFreeHost(p);
  for (uint64_t* c : flagChunks_) (void)cudaFreeHost(c);
  if (eagerWords_) (void)cudaFreeHost(eagerWords_);
  (void)cudaGetLastError();
}

void StagerDeleter::operator()(Stager* s) const {
  if (s->stop()) delete s;
}

ncclResult_t Stager::eagerWords() {
  if (eagerWords_) return ncclSuccess;
  RelaxedCapture relaxed;  // another thread may be capturing in global mode
  void* p = nullptr;
  CUDACHECK(cudaHostAlloc(&p, 2 * kLine, cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc (staging flags)",
            comm_);
  memset(p, 0, 2 * kLine);
  void* d = nullptr;
  cudaError_t e = cudaHostGetDevicePointer(&d, p, 0);
  if (e != cudaSuccess) {
    (void)cudaFreeHost(p);
    CUDACHECK(e, "cudaHostGetDevicePointer (staging flags)", comm_);
  }
  eagerWords_ = static_cast<char*>(p);
  go_ = reinterpret_cast<uint64_t*>(eagerWords_);
  done_ = reinterpret_cast<uint64_t*>(eagerWords_ + kLine);
  goDev_ = static_cast<uint64_t*>(d);
  doneDev_ = reinterpret_cast<const uint64_t*>(static_cast<char*>(d) + kLine);
  return ncclSuccess;
}

ncclResult_t Stager::capturedDone(StageJob* job) {
  RelaxedCapture relaxed;
  if (flagsUsed_ == kFlagsPerBlock) {
    void* p = nullptr;
    CUDACHECK(cudaHostAlloc(&p, kFlagsPerBlock * sizeof(uint64_t), cudaHostAllocMapped | cudaHostAllocPortable),
              "cudaHostAlloc (staging flags)", comm_);
    memset(p, 0, kFlagsPerBlock * sizeof(uint64_t));
    flagChunks_.push_back(static_cast<uint64_t*>(p));
    flagsUsed_ = 0;
  }
  uint64_t* h = flagChunks_.back() + flagsUsed_++;
  void* d = nullptr;
  CUDACHECK(cudaHostGetDevicePointer(&d, h, 0), "cudaHostGetDevicePointer (staging flag)", comm_);
  job->done = h;
  job->doneDev = static_cast<const uint64_t*>(d);
  return ncclSuccess;
}

ncclResult_t Stager::buffer(size_t bytes, bool persistent, char** out) {
  if (!persistent && bytes <= eagerBytes_) {
    *out = eagerBuf_;
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
    eagerBuf_ = *out;
    eagerBytes_ = bytes;
  }
  return ncclSuccess;
}

// Lays out the job's staging buffer: each operation's input (copied in before
// the proxy runs) and output (copied out after), and the host arguments. A
// collective larger than the agreed chunk goes in chunks (runChunks).
ncclResult_t Stager::run(const std::vector<CollArgs>& ops) {
  ncclComm* comm = comm_;
  if (ops.size() == 1) {
    const size_t per = devStagedChunk(ops[0]);
    if (per < ops[0].count) return runChunks(ops[0], per);
  }
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
      case CollKind::AllToAll:  // device buffers: sends and receives by now (api/coll_api.cc)
      case CollKind::Gather:
      case CollKind::Scatter: return ncclInternalError;
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
  std::vector<Stage> stages(1);
  Stage& st = stages[0];
  st.job = std::make_unique<StageJob>();
  st.job->stager = this;
  st.job->persistent = persistent;
  st.job->opName = ops[0].opName;
  NCCLCHECK(persistent ? capturedDone(st.job.get()) : eagerWords());
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
      st.before.push_back({stage + p.scalarOff, a.deviceScalar, typeSize(a.type)});
      h.deviceScalar = stage + p.scalarOff;
    }
    if (p.copyIn) st.before.push_back({stage + p.inOff, a.sendbuff, p.in});
    if (p.copyOut) st.after.push_back({a.recvbuff, stage + p.outOff, p.out});
    st.job->hostOps.push_back(h);
  }
  return enqueue(s, stages);
}

// A collective in chunks of `per` elements, each a collective of its own on
// the proxy. The stream copies every chunk in, handing each over as it
// arrives, then copies each out once the proxy is done with it: while the
// network carries one chunk, the copy engine moves the next one in or the
// last one out. The data lies in staging as the whole call's would; a chunk
// of an allgather's output or a reduce-scatter's input is a row of every
// rank's block, which the proxy's collective sees packed (one 2D copy each way).
ncclResult_t Stager::runChunks(const CollArgs& a, size_t per) {
  cudaStream_t s = static_cast<cudaStream_t>(a.stream);
  const bool persistent = capturing(s);
  const int n = comm_->nranks, me = comm_->rank;
  const size_t es = typeSize(a.type), block = a.count * es;
  const size_t inRows = a.kind == CollKind::ReduceScatter ? n : 1, outRows = a.kind == CollKind::AllGather ? n : 1;
  const bool copyIn = a.kind != CollKind::Broadcast || a.root == me;
  const bool copyOut = a.kind != CollKind::Reduce || a.root == me;  // a reduce's output is only the root's
  const size_t inOff = a.deviceScalar ? kAlign : 0, outOff = inOff + (copyIn ? alignUp(inRows * block) : 0);
  char* stage = nullptr;
  NCCLCHECK(buffer(outOff + alignUp(outRows * block), persistent, &stage));
  if (!persistent) NCCLCHECK(eagerWords());
  if (!announcedChunks_[persistent]) {
    announcedChunks_[persistent] = true;
    INFO(kColl, "%s rank %d: %s of %zu bytes staged in %zu chunks of %zu elements (first such %s call)",
         comm_->name.c_str(), me, a.opName, std::max(inRows, outRows) * block, (a.count + per - 1) / per, per,
         persistent ? "captured" : "eager");
  }
  std::vector<Stage> stages;
  for (size_t off = 0; off < a.count; off += per) {
    const size_t len = std::min(per, a.count - off), bytes = len * es, at = off * es;
    Stage st;
    st.job = std::make_unique<StageJob>();
    st.job->stager = this;
    st.job->persistent = persistent;
    st.job->opName = a.opName;
    if (persistent) NCCLCHECK(capturedDone(st.job.get()));
    CollArgs h = a;
    h.onDevice = false;
    h.stream = nullptr;
    h.keep.reset();
    h.cut = true;
    h.count = len;
    h.sendbuff = stage + inOff + inRows * at;
    h.recvbuff = stage + outOff + outRows * at;
    if (a.kind == CollKind::Broadcast && a.root != me) h.sendbuff = h.recvbuff;
    if (a.deviceScalar) {  // PreMulSum's device scalar: copied once, read by every chunk
      if (off == 0) st.before.push_back({stage, a.deviceScalar, es});
      h.deviceScalar = stage;
    }
    if (copyIn)
      st.before.push_back(
          {const_cast<void*>(h.sendbuff), static_cast<const char*>(a.sendbuff) + at, bytes, inRows, bytes, block});
    if (copyOut) st.after.push_back({static_cast<char*>(a.recvbuff) + at, h.recvbuff, bytes, outRows, block, bytes});
    st.job->hostOps.push_back(h);
    stages.push_back(std::move(st));
  }
  return enqueue(s, stages);
}

// A call on `bytes` of `src`, copied into staging first (a one-sided put).
ncclResult_t Stager::run(cudaStream_t s, const void* src, size_t bytes, StagedCall call, const char* opName) {
  const bool persistent = capturing(s);
  char* stage = nullptr;
  NCCLCHECK(buffer(bytes, persistent, &stage));
  std::vector<Stage> stages(1);
  Stage& st = stages[0];
  st.job = std::make_unique<StageJob>();
  st.job->stager = this;
  st.job->persistent = persistent;
  st.job->call = std::move(call);
  st.job->callInput = stage;
  st.job->opName = opName;
  NCCLCHECK(persistent ? capturedDone(st.job.get()) : eagerWords());
  if (bytes) st.before.push_back({stage, src, bytes});
  return enqueue(s, stages);
}

cudaError_t Stager::handOver(cudaStream_t s, uint64_t seq, const DevCtx& ctx) {
  if (write_ && write_(s, reinterpret_cast<unsigned long long>(goDev_), seq, 0) == 0)
    return cudaSuccess;  // default flags: the copies in are visible before `go` is
  if (write_) INFO(kInit, "%s rank %d: the driver refused a stream write; a kernel writes `go` from now on",
                   comm_->name.c_str(), comm_->rank);
  write_ = nullptr;
  return devLaunchStageHandover(goDev_, seq, nullptr, ctx, s);
}

ncclResult_t Stager::enqueue(cudaStream_t s, std::vector<Stage>& stages) {
  ncclComm* comm = comm_;
  const bool persistent = stages[0].job->persistent;
  const char* opName = stages[0].job->opName;
  if (!persistent) {
    std::lock_guard<std::mutex> lock(mu_);
    for (Stage& st : stages) {
      st.job->seq = ++lastSeq_;
      st.job->done = done_;
      st.job->doneDev = doneDev_;
    }
  }
  // What each job's wait kernel needs: an eager job belongs to the proxy
  // (which may run and free it) once it is queued.
  std::vector<std::pair<uint64_t, const uint64_t*>> waits;
  for (const Stage& st : stages) waits.emplace_back(st.job->seq, st.job->doneDev);
  DevCtx ctx = ctxOf(comm);
  size_t handedOver = 0;  // the first jobs whose hand-over is on the stream: the proxy must run them
  ncclResult_t r = ordered(comm, s, opName, [&]() -> cudaError_t {
    cudaError_t e = cudaSuccess;
    // Every job's copies in and hand-over first, so that the copies of later
    // jobs run while the proxy works on earlier ones (a whole call: one job).
    // An eager job is queued as soon as it is handed over: the proxy may
    // start on it while the rest of the call is being enqueued.
    for (Stage& st : stages) {
      for (const Copy& c : st.before)
        if ((e = copyAsync(c, s)) != cudaSuccess) return e;
      StageJob* job = st.job.get();
      e = persistent ? cudaLaunchHostFunc(s, kick, job) : handOver(s, job->seq, ctx);
      if (e != cudaSuccess) return e;
      ++handedOver;
      if (!persistent) {
        std::lock_guard<std::mutex> lock(mu_);
        eager_.push_back(std::move(st.job));  // run once `go` reaches its seq
        cv_.notify_one();
      }
    }
    for (size_t i = 0; i < stages.size(); ++i) {
      if ((e = devLaunchStageHandover(nullptr, waits[i].first, waits[i].second, ctx, s)) != cudaSuccess) return e;
      for (const Copy& c : stages[i].after)
        if ((e = copyAsync(c, s)) != cudaSuccess) return e;
    }
    return cudaSuccess;
  });
  if (persistent) {
    for (Stage& st : stages) persistent_.push_back(std::move(st.job));  // a graph may replay them until the communicator goes
  } else if (r != ncclSuccess && handedOver > 0) {
    // Part of the call is on the stream and the proxy runs it, the rest not
    // (or not the waits that keep the next call's copies behind it): the
    // ranks' calls no longer pair up. Fail the communicator, as a failed
    // proxy does. (A failed capture is the caller's to discard.)
    commSetError(comm, r);
  }
  return r;
}

size_t devStagedChunk(const CollArgs& a) {
  const ncclComm* comm = a.comm;
  if (a.cut || !comm->dev || comm->nhosts <= 1) return a.count;
  return stageChunkElems(a, comm->nranks, comm->dev->stageChunk);
}

ncclResult_t devRunHostChunks(const CollArgs& a, size_t per) {
  const int n = a.comm->nranks;
  const size_t es = typeSize(a.type), block = a.count * es;
  const bool gather = a.kind == CollKind::AllGather, scatter = a.kind == CollKind::ReduceScatter;
  std::vector<char> packed(gather || scatter ? n * per * es : 0);  // a chunk's rows, one per rank
  const char* send = static_cast<const char*>(a.sendbuff);
  char* recv = static_cast<char*>(a.recvbuff);
  for (size_t off = 0; off < a.count; off += per) {
    const size_t len = std::min(per, a.count - off), bytes = len * es, at = off * es;
    CollArgs h = a;  // its PreMulSum scalar already read (runCollective)
    h.cut = true;
    h.count = len;
    h.sendbuff = send ? send + at : nullptr;  // NULL: a buffer the call does not use on this rank
    h.recvbuff = recv ? recv + at : nullptr;
    if (scatter) {
      for (int k = 0; k < n; ++k) memcpy(packed.data() + k * bytes, send + k * block + at, bytes);
      h.sendbuff = packed.data();
    }
    if (gather) h.recvbuff = packed.data();
    NCCLCHECK(runCollective(h));
    if (gather)  // in place, row `rank` is the input itself: the same bytes
      for (int k = 0; k < n; ++k) memmove(recv + k * block + at, packed.data() + k * bytes, bytes);
  }
  return ncclSuccess;
}

namespace {

// The communicator's stager, made with its first staged call.
ncclResult_t startStager(ncclComm* comm) {
  DevState& d = *comm->dev;
  if (d.stager) return ncclSuccess;
  std::unique_ptr<Stager> s(new Stager(comm));
  if (const ncclResult_t r = s->start(); r != ncclSuccess) {
    commSetError(comm, r);  // its peers would wait for this call's part
    return r;
  }
  d.stager.reset(s.release());
  return ncclSuccess;
}

}  // namespace

ncclResult_t devRunStaged(ncclComm* comm, const std::vector<CollArgs>& ops) {
  if (ops.empty()) return ncclSuccess;  // one stream: devRunP2p checked the group's
  DevState& d = *comm->dev;
  CUDACHECK(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm);
  NCCLCHECK(startStager(comm));
  return d.stager->run(ops);
}

ncclResult_t devRunStagedCall(ncclComm* comm, void* stream, const void* src, size_t bytes, StagedCall call,
                              const char* opName) {
  DevState& d = *comm->dev;
  CUDACHECK(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm);
  NCCLCHECK(startStager(comm));
  return d.stager->run(static_cast<cudaStream_t>(stream), src, bytes, std::move(call), opName);
}

ncclResult_t devBeforeHostOp(ncclComm* comm) {
  if (!comm->dev || !comm->dev->stager || tlsOnProxy) return ncclSuccess;
  return devWait(comm);
}

}  // namespace accl

#else  // built without the CUDA executor

#include "coll/coll.h"
#include "coll/dev_comm.h"

namespace accl {
size_t devStagedChunk(const CollArgs& a) { return a.count; }
ncclResult_t devRunHostChunks(const CollArgs&, size_t) { return ncclInternalError; }
ncclResult_t devRunStaged(ncclComm*, const std::vector<CollArgs>&) { return ncclInternalError; }
ncclResult_t devRunStagedCall(ncclComm*, void*, const void*, size_t, StagedCall, const char*) {
  return ncclInternalError;
}
ncclResult_t devBeforeHostOp(ncclComm*) { return ncclSuccess; }
}  // namespace accl

#endif

// Host code either way (tests/cpp/unit_tests.cc checks it without a GPU).
#include <algorithm>

#include "base/check.h"
#include "base/param.h"
#include "coll/coll.h"
#include "coll/dev_comm.h"

namespace accl {

// A chunk holds about `chunkBytes` of the larger buffer (an allgather's
// output, a reduce-scatter's input: a row per rank), whole 64-byte lines of
// elements; the count decides the rest, so every rank computes the same.
size_t stageChunkElems(const CollArgs& a, int nranks, int64_t chunkBytes) {
  switch (a.kind) {
    case CollKind::AllReduce:
    case CollKind::Broadcast:
    case CollKind::Reduce:
    case CollKind::AllGather:
    case CollKind::ReduceScatter:
      break;
    default:
      return a.count;
  }
  if (chunkBytes <= 0) return a.count;
  const size_t es = typeSize(a.type), line = std::max<size_t>(1, 64 / es);
  const size_t rows = a.kind == CollKind::AllGather || a.kind == CollKind::ReduceScatter ? nranks : 1;
  size_t per = std::max(static_cast<size_t>(chunkBytes) / (es * rows),
                        (a.count + kMaxStageChunks - 1) / kMaxStageChunks);
  per = std::max<size_t>(line, (per + line - 1) / line * line);
  return std::min(per, a.count);
}

}  // namespace accl
