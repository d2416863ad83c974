// Direct collectives in host mode (coll/host_direct.h says what and when).
#include "coll/host_direct.h"

#include <sys/mman.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "coll/rma.h"
#include "core/check.h"
#include "core/comm.h"
#include "core/wait.h"
#include "transport/connection.h"

namespace accl {
namespace {

// A part is moved in chunks that stay in the core's cache between the
// reduction into one output and the copies into the others. Through cross
// memory attach a chunk costs a system call per peer, so those are larger
// (up to 128 KiB: about the speed of memcpy here; smaller chunks lose to the
// calls' cost), while the chunks of all inputs together still fit in L2.
constexpr size_t kChunkBytes = 32 << 10;
size_t attachChunkBytes(int n) {
  return std::clamp<size_t>((size_t{1} << 20) / static_cast<size_t>(n) & ~size_t{4095}, 32 << 10, 128 << 10);
}

// A call as a rank publishes it.
struct CallDesc {
  int32_t kind, root, type, op;
  int32_t sendWin, recvWin;  // the windows the buffers lie in, or -1: sendAt/recvAt are addresses
  uint64_t bytes;            // the call's count in bytes
  uint64_t sendAt, recvAt;   // offsets in the windows, or addresses in the rank's process
  Scalar scalar;             // this rank's PreMulSum scalar, for its own input
};

// A rank's slot, in the segment every rank maps (two cache line pairs each).
// Calls alternate between two descriptions: an inline call has no closing
// barrier, so a rank may publish the next call while another still reads
// this one's; it cannot publish the one after before every rank published
// the next, that is, finished reading this one.
struct alignas(128) Slot {
  std::atomic<uint64_t> published;  // the call whose buffers are below
  std::atomic<uint64_t> finished;   // the last call whose part this rank moved
  std::atomic<uint64_t> left;       // the last call this rank returned from (touches no buffer of it)
  std::atomic<int32_t> failed;      // this rank failed or stopped: the others leave their direct calls
  CallDesc desc[2];                 // call c's is desc[c & 1]
};
static_assert(sizeof(Slot) == 256, "one slot per 256 bytes");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "slots are shared between processes");

// Random, one per process, at a fixed address: ranks with the same key and
// pid share an address space (pids alone repeat across pid namespaces). A
// peer that reads the key at that address through cross memory attach has
// reached this very process. A child of fork() makes a key of its own.
std::mutex keyMu;
uint64_t key = 0;
pid_t keyPid = 0;
uint64_t processKey() {
  std::lock_guard<std::mutex> lock(keyMu);
  if (keyPid != getpid()) {
    keyPid = getpid();
    uint64_t k = 0;
    if (getrandom(&k, sizeof(k), 0) != sizeof(k))
      k = (static_cast<uint64_t>(keyPid) << 32) ^ static_cast<uint64_t>(Deadline::Clock::now().time_since_epoch().count());
    key = k | 1;  // never 0, which a failed read leaves
  }
  return key;
}

// Every rank on one host: what all ranks know alike.
bool oneHost(const ncclComm* comm) {
  if (comm->nranks < 2) return false;
  for (const PeerInfo& p : comm->peers)
    if (p.hostHash != comm->peers[comm->rank].hostHash) return false;
  return true;
}

bool sameProcess(const ncclComm* comm, int k) {
  const PeerInfo &p = comm->peers[k], &me = comm->peers[comm->rank];
  return p.processKey == me.processKey && p.pid == me.pid;
}

// Calls this small carry their input in the slots' segment itself: each rank
// has two payloads of kInlineBytes after the slots, used by alternate calls.
constexpr size_t kInlineBytes = 16384;

size_t segmentBytes(int n) { return static_cast<size_t>(n) * (sizeof(Slot) + 2 * kInlineBytes); }
std::string segmentName(const ncclComm* comm) { return shmSegmentName(comm, 0, 0, kTagHostDirect); }

const char* opName(OpKind k) {
  switch (k) {
    case OpKind::Sum: return "sum";
    case OpKind::Prod: return "prod";
    case OpKind::Max: return "max";
    case OpKind::Min: return "min";
    case OpKind::PreMulSum: return "PreMulSum";
    case OpKind::SumPostDiv: return "avg";
  }
  return "?";
}

// Whether the other ranks' part of the call reads rank k's input (writes its output).
bool sharesSend(CollKind c, int k, int root) {
  return c == CollKind::AllReduce || c == CollKind::Reduce || c == CollKind::ReduceScatter ||
         (c == CollKind::Broadcast && k == root);
}
bool sharesRecv(CollKind c, int k, int root) {
  return c == CollKind::AllReduce || c == CollKind::AllGather || c == CollKind::Broadcast ||
         (c == CollKind::Reduce && k == root);
}

// This rank can read process `pid`'s memory: it reads the peer's process key
// at the address the peer gave. errno says why not.
bool canAttach(pid_t pid, uint64_t keyAddr, uint64_t key) {
  uint64_t got = 0;
  iovec local{&got, sizeof(got)}, remote{reinterpret_cast<void*>(keyAddr), sizeof(got)};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(sizeof(got))) return false;
  if (got != key) errno = ESRCH;  // another process with that pid (another pid namespace)
  return got == key;
}

// Rank k's buffer in a call, as this rank reaches it: `here`, an address in
// this process (its own, a rank of this process, a window mapped here), or
// else `there`, an address in rank k's process, through cross memory attach.
struct Reach {
  char* here = nullptr;
  uint64_t there = 0;
};

}  // namespace

class HostDirect {
 public:
  // `owner`: the segment's name, which this rank made and unlinks at the latest here.
  HostDirect(ncclComm* comm, void* map, size_t bytes, std::string owner = {})
      : slots(static_cast<Slot*>(map)), in(comm->nranks), out(comm->nranks), scalars(comm->nranks),
        order(comm->nranks), src(comm->nranks), comm_(comm), bytes_(bytes), owner_(std::move(owner)) {
    comm_->directStopWord.store(&slots[comm->rank].failed);
  }
  ~HostDirect() {
    slots[comm_->rank].failed.store(1);  // destroyed: a peer in a direct call leaves it at once
    comm_->directStopWord.store(nullptr);
    munmap(slots, bytes_);
    unlink();
  }
  // Every rank has mapped the segment: its name is no longer needed.
  void unlink() {
    if (!owner_.empty()) shm_unlink(owner_.c_str());
    owner_.clear();
  }

  Slot* slots;
  // Rank k's input of call `call`, when it runs inline.
  char* payload(int k, uint64_t call) const {
    char* base = reinterpret_cast<char*>(slots + comm_->nranks);
    return base + (static_cast<size_t>(k) * 2 + (call & 1)) * kInlineBytes;
  }
  uint64_t calls = 0;        // direct calls this rank made
  bool anyBuffer = false;    // every rank reaches every other's memory: calls need no windows
  int64_t inlineBytes = 0;   // calls up to this size run inline (every rank's agreed bound)
  int64_t minBytes = 0;      // calls from this size run direct (likewise)
  bool announced = false;    // the first direct call's INFO line is out
  bool announcedInline = false;  // and the first inline call's
  std::vector<char> scratch;  // chunks read through cross memory attach
  // A call's per-rank state, sized once: a communicator runs one call at a
  // time, and small calls should not pay for allocations.
  std::vector<Reach> in, out;
  std::vector<Scalar> scalars;
  std::vector<int> order;
  std::vector<const char*> src;

 private:
  ncclComm* comm_;
  size_t bytes_;
  std::string owner_;
};

void HostDirectDeleter::operator()(HostDirect* d) const { delete d; }

HostDirectExport hostDirectExport(const void* buff, size_t bytes) {
  HostDirectExport e{};
  e.share = hostShareFind(buff, bytes);
  e.addr = reinterpret_cast<uintptr_t>(buff);
  e.bytes = bytes;
  return e;
}

void hostDirectPrepare(ncclComm* comm, PeerInfo* me) {
  me->processKey = processKey();
  me->reachProbe = reinterpret_cast<uintptr_t>(&key);
  me->hostDirect = 0;
  // NCCL_ALGO leaves every call to the tuner's algorithms, as NCCL's leaves
  // out the algorithms it does not name.
  if (comm->nranks < 2 || paramInt(Param::Direct) == 0 || paramInt(Param::ShmDisable) != 0 ||
      paramString(Param::Algo)[0] != '\0')
    return;
  if (comm->rank != 0) {
    me->hostDirect = 1;
    return;
  }
  // Rank 0 makes the slots before the allgather, so that the others can open
  // them after it; it unlinks them once all did, or at once when the ranks
  // are not all on this host.
  void* map = nullptr;
  const size_t bytes = segmentBytes(comm->nranks);
  if (shmSegmentCreate(comm, 0, segmentName(comm), bytes, &map) != ncclSuccess) return;  // WARNed: the ring
  memset(map, 0, bytes);
  comm->hostDirect.reset(new HostDirect(comm, map, bytes, segmentName(comm)));
  me->hostDirect = 1;
}

ncclResult_t hostDirectInit(ncclComm* comm) {
  const int n = comm->nranks, me = comm->rank;
  int off = -1;
  for (int q = 0; q < n && off < 0; ++q)
    if (!comm->peers[q].hostDirect) off = q;
  if (!oneHost(comm) || off >= 0) {
    comm->hostDirect.reset();
    if (oneHost(comm) && me == 0)
      INFO(kInit, "%s: no direct collectives: rank %d runs with ACCL_DIRECT=0, NCCL_SHM_DISABLE=1 or NCCL_ALGO%s",
           comm->name.c_str(), off, off == 0 ? ", or could not make their slots" : "");
    return ncclSuccess;
  }
  if (me != 0) {
    void* map = nullptr;
    const size_t bytes = segmentBytes(n);
    if (shmSegmentOpen(comm, 0, segmentName(comm), bytes, &map) == ncclSuccess)
      comm->hostDirect.reset(new HostDirect(comm, map, bytes));
  }
  // Each rank tries to attach to every process of another rank.
  struct Report {
    int32_t slots;      // this rank mapped the slots
    int32_t unreached;  // a rank whose process this one cannot attach to (itself: ACCL_CMA=0), or -1
    int32_t err;        // errno of the attempt
    int64_t inlineBytes, minBytes;  // this rank's ACCL_DIRECT_INLINE_BYTES and ACCL_DIRECT_MIN_BYTES
  };
  std::vector<Report> all(n);
  Report& mine = all[me];
  mine = {comm->hostDirect != nullptr, -1, 0,
          std::min<int64_t>(kInlineBytes, paramInt(Param::DirectInlineBytes)), paramInt(Param::DirectMinBytes)};
  for (int q = 0; q < n && mine.unreached < 0; ++q) {
    if (q == me || sameProcess(comm, q)) continue;
    if (paramInt(Param::Cma) == 0) {
      mine.unreached = me;
    } else if (!canAttach(comm->peers[q].pid, comm->peers[q].reachProbe, comm->peers[q].processKey)) {
      mine.unreached = q;
      mine.err = errno;
    }
  }
  NCCLCHECK(comm->bootstrap->allgather(all.data(), sizeof(Report)));
  if (comm->hostDirect) comm->hostDirect->unlink();  // rank 0: every rank opened it (or failed to) before the allgather
  for (int q = 0; q < n; ++q) {
    if (all[q].slots) continue;
    comm->hostDirect.reset();
    if (me == 0) INFO(kInit, "%s: no direct collectives: rank %d could not map their slots", comm->name.c_str(), q);
    return ncclSuccess;
  }
  int who = 0;
  while (who < n && all[who].unreached < 0) ++who;
  HostDirect& d = *comm->hostDirect;
  d.anyBuffer = who == n;
  // Which path a call takes depends on its size alone, so every rank must
  // use the same bounds: a rank inline and another not would each think the
  // other's part done. The smallest inline bound, the largest direct one.
  d.inlineBytes = all[0].inlineBytes;
  d.minBytes = all[0].minBytes;
  for (const Report& rep : all) {
    d.inlineBytes = std::min(d.inlineBytes, rep.inlineBytes);
    d.minBytes = std::max(d.minBytes, rep.minBytes);
  }
  if (me != 0) return ncclSuccess;
  if (d.anyBuffer) {
    INFO(kInit, "%s: direct collectives on any buffer (%d ranks on this host; those of other processes reached "
         "through cross memory attach)", comm->name.c_str(), n);
  } else if (all[who].unreached == who) {
    INFO(kInit, "%s: direct collectives only on symmetric windows: rank %d runs with ACCL_CMA=0",
         comm->name.c_str(), who);
  } else {
    INFO(kInit, "%s: direct collectives only on symmetric windows: rank %d cannot attach to rank %d's process "
         "(process_vm_readv: %s; see ptrace's access rules)", comm->name.c_str(), who, all[who].unreached,
         strerror(all[who].err));
  }
  return ncclSuccess;
}

ncclResult_t hostDirectAttach(ncclComm* comm, ncclWindow_vidmem* win, const std::vector<HostDirectExport>& all) {
  HostDirect* d = comm->hostDirect.get();
  if (!d) return ncclSuccess;  // init said why
  const int n = comm->nranks, me = comm->rank;
  int32_t unreached = -1;  // the rank whose part this rank cannot map
  std::vector<char*> bases(n, nullptr);
  for (int q = 0; q < n && unreached < 0; ++q) {
    const HostDirectExport& e = all[q];
    if (e.bytes == 0) continue;  // no window on rank q: its buffers are never shared
    if (q == me) {
      bases[q] = static_cast<char*>(win->base);
    } else if (sameProcess(comm, q)) {
      bases[q] = reinterpret_cast<char*>(e.addr);
    } else if (e.share.fd < 0) {
      unreached = q;  // not ncclMemAlloc's memory: no way to map it
    } else {
      void* mapping = nullptr;
      size_t bytes = 0;
      if (hostShareMap(e.share, &bases[q], &mapping, &bytes) != ncclSuccess) unreached = q;
      else win->hostMaps.push_back({mapping, bytes});
    }
  }
  std::vector<int32_t> unreachedBy(n, -1);
  unreachedBy[me] = unreached;
  ncclResult_t r = comm->bootstrap->allgather(unreachedBy.data(), sizeof(int32_t));
  int who = 0;
  while (who < n && unreachedBy[who] < 0) ++who;
  if (r != ncclSuccess || who < n) {
    hostDirectDetach(win);
    if (r == ncclSuccess)
      INFO(kInit, "%s rank %d: window #%d: rank %d cannot map rank %d's part (windows of other processes must be "
           "ncclMemAlloc memory): collectives on it %s", comm->name.c_str(), me, win->index, who, unreachedBy[who],
           d->anyBuffer ? "reach its buffers as they do any others" : "take the ring");
    return r;
  }
  win->hostPeerBase = std::move(bases);
  win->hostDirect = true;
  INFO(kInit, "%s rank %d: window #%d: direct collectives (%d ranks on this host)", comm->name.c_str(), me,
       win->index, n);
  return ncclSuccess;
}

void hostDirectStop(ncclComm* comm) {
  if (std::atomic<int32_t>* word = comm->directStopWord.load()) word->store(1);
}

void hostDirectDetach(ncclWindow_vidmem* win) {
  for (const auto& m : win->hostMaps) hostShareUnmap(m.first, m.second);
  win->hostMaps.clear();
  win->hostPeerBase.clear();
  win->hostDirect = false;
}

namespace {

// The buffers of one call: every rank's input and output (both empty where no
// other rank touches them), and scalars.
struct Call {
  const CollArgs* a;
  const Reducer* red;
  ncclComm* comm;
  int n, me;
  size_t esize;
  Reach *in, *out;
  Scalar* scalars;
  int* order;         // the order of the inputs of a reduction (n entries)
  const char** src;   // a reduction's inputs (n entries)
  bool attached = false;  // some buffer is reached through cross memory attach
  char* scratch = nullptr;  // n + 1 chunks of chunkBytes, when attached
  size_t chunkBytes = kChunkBytes;

  // Rank k's input bytes [at, at + bytes): where this process reads them
  // (copied into tmp first when they are reached through cross memory attach).
  ncclResult_t read(int k, size_t at, size_t bytes, char* tmp, const char** p) const {
    if (in[k].here) {
      *p = in[k].here + at;
      return ncclSuccess;
    }
    *p = tmp;
    return attach(k, false, in[k].there + at, tmp, bytes);
  }
  bool inPlace(int k) const {
    return in[k].here ? in[k].here == out[k].here : in[k].there == out[k].there;
  }
  // src's bytes to rank k's output at [at, at + bytes).
  ncclResult_t write(int k, size_t at, const char* src, size_t bytes) const {
    if (out[k].here) {
      if (out[k].here + at != src) memcpy(out[k].here + at, src, bytes);
      return ncclSuccess;
    }
    return attach(k, true, out[k].there + at, const_cast<char*>(src), bytes);
  }

 private:
  ncclResult_t attach(int k, bool toPeer, uint64_t addr, char* local, size_t bytes) const {
    const pid_t pid = comm->peers[k].pid;
    size_t done = 0;
    ssize_t got = 0;
    while (done < bytes) {  // a short transfer stops at a page it could not reach: once more from there
      iovec l{local + done, bytes - done}, r{reinterpret_cast<void*>(addr + done), bytes - done};
      got = toPeer ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
      if (got <= 0) break;
      done += static_cast<size_t>(got);
    }
    if (done == bytes) return ncclSuccess;
    const int err = got < 0 ? errno : EFAULT;
    if (err == ESRCH) {
      comm->failedRank.store(k);
      WARN("%s (%s, rank %d): rank %d's process has died", a->opName, comm->name.c_str(), me, k);
      return ncclRemoteError;
    }
    WARN("%s (%s, rank %d): %s rank %d's %s at 0x%llx (%zu bytes, through cross memory attach) failed after %zu "
         "bytes: %s%s", a->opName, comm->name.c_str(), me, toPeer ? "writing" : "reading", k,
         toPeer ? "output" : "input", static_cast<unsigned long long>(addr), bytes, done, strerror(err),
         err == EFAULT ? " (a buffer on one side is not all mapped, or the output is read-only)" : "");
    return err == EFAULT ? ncclInvalidArgument : ncclSystemError;
  }
};

// Until ready(slot k) for every rank k; a failed rank, abort, ACCL_TIMEOUT and
// a dead peer process end the wait with an error that names the rank.
// stopped: leave when a rank's slot says it stopped (not when waiting for
// the ranks to leave a failed call: a stopped rank may still be moving).
template <typename Ready>
ncclResult_t waitAll(ncclComm* comm, HostDirect& d, const char* op, const char* stage, Ready ready,
                     bool stopped = true) {
  Deadline deadline(&comm->abortFlag);
  for (int k = 0; k < comm->nranks; ++k) {
    Backoff b;
    while (!ready(d.slots[k])) {
      b.pause();
      if (!b.checkNow() || ready(d.slots[k])) continue;  // a rank that got here decides for itself
      if (stopped && d.slots[k].failed.load(std::memory_order_relaxed)) {
        comm->failedRank.store(k);
        WARN("%s (%s, rank %d): rank %d stopped (its direct collective failed, or its communicator failed, was "
             "aborted or destroyed)", op, comm->name.c_str(), comm->rank, k);
        return ncclRemoteError;
      }
      if (deadline.aborted()) return commAbortedResult(comm, op);
      if (deadline.expired()) {
        WARN("%s (%s, rank %d): timed out (ACCL_TIMEOUT=%lld s) waiting for rank %d %s the direct collective", op,
             comm->name.c_str(), comm->rank, static_cast<long long>(deadline.seconds()), k, stage);
        return ncclTimeout;
      }
      if (b.napping() && !processAlive(comm->peers[k].pid)) {
        comm->failedRank.store(k);
        WARN("%s (%s, rank %d): rank %d's process has died", op, comm->name.c_str(), comm->rank, k);
        return ncclRemoteError;
      }
    }
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return ncclSuccess;
}

// acc <- the reduction of inputs src[0..n) (rank order[j]'s at src[j]), for
// `len` elements, finished; also copied to `also` when not NULL. src[0] is the
// input that acc may alias (in place), so it is read before acc is written.
void reduceChunk(const Call& c, const int* order, const char* const* src, size_t len, char* acc, char* also) {
  const Reducer& red = *c.red;
  const char* partial = src[0];
  if (red.k.prepare) {
    red.k.prepare(acc, partial, len, &c.scalars[order[0]]);
    partial = acc;
  }
  for (int j = 1; j < c.n; ++j) {
    const Scalar* s = &c.scalars[order[j]];
    if (j == c.n - 1 && also && red.k.combine2 && !red.k.finish) {
      red.k.combine2(acc, also, partial, src[j], len, s);
      return;
    }
    red.k.combine(acc, partial, src[j], len, s);
    partial = acc;
  }
  red.finish(acc, len);
  if (also) memcpy(also, acc, len * c.esize);
}

// This rank's part of the collective.
ncclResult_t movePart(const Call& c) {
  const CollArgs& a = *c.a;
  const int n = c.n, me = c.me;
  const size_t es = c.esize, chunk = std::max<size_t>(1, c.chunkBytes / es), tmpBytes = c.chunkBytes;
  // AllReduce, Reduce and Broadcast split the count among the ranks (64-byte
  // aligned parts); ReduceScatter and AllGather give each rank its block.
  size_t lo = 0, hi = a.count;
  if (a.kind == CollKind::AllReduce || a.kind == CollKind::Reduce || a.kind == CollKind::Broadcast) {
    const size_t align = std::max<size_t>(1, 64 / es);
    size_t per = (a.count + n - 1) / n;
    per = (per + align - 1) / align * align;
    lo = std::min(a.count, per * me);
    hi = std::min(a.count, per * (me + 1));
  }
  // Reductions take the inputs in this order: the result's rank first (in place, its input is the output).
  const int dst = a.kind == CollKind::Reduce ? a.root : me;
  int* order = c.order;
  const char** src = c.src;
  for (int j = 0; j < n; ++j) order[j] = (dst + j) % n;
  for (size_t off = lo; off < hi; off += chunk) {
    if (c.comm->abortFlag.load(std::memory_order_relaxed)) return commAbortedResult(c.comm, a.opName);
    const size_t len = std::min(chunk, hi - off), bytes = len * es, at = off * es;
    switch (a.kind) {
      case CollKind::AllReduce:
      case CollKind::Reduce:
      case CollKind::ReduceScatter: {  // ReduceScatter: block me of every input, into rank me's output
        const size_t inAt = (a.kind == CollKind::ReduceScatter ? me * a.count + off : off) * es;
        for (int j = 0; j < n; ++j) NCCLCHECK(c.read(order[j], inAt, bytes, c.scratch + j * tmpBytes, &src[j]));
        char* acc = c.out[dst].here ? c.out[dst].here + at : c.scratch + n * tmpBytes;
        const int next = (me + 1) % n;
        char* also = a.kind == CollKind::AllReduce && c.out[next].here ? c.out[next].here + at : nullptr;
        reduceChunk(c, order, src, len, acc, also);
        if (!c.out[dst].here) NCCLCHECK(c.write(dst, at, acc, bytes));
        for (int j = also ? 2 : 1; a.kind == CollKind::AllReduce && j < n; ++j)
          NCCLCHECK(c.write((me + j) % n, at, acc, bytes));
        break;
      }
      case CollKind::AllGather: {
        const char* mine = c.in[me].here + at;
        for (int j = 0; j < n; ++j) NCCLCHECK(c.write((me + j) % n, (me * a.count + off) * es, mine, bytes));
        break;
      }
      case CollKind::Broadcast: {
        const char* from = nullptr;
        NCCLCHECK(c.read(a.root, at, bytes, c.scratch, &from));
        for (int j = 0; j < n; ++j) {
          const int k = (me + j) % n;
          if (k != a.root || !c.inPlace(k)) NCCLCHECK(c.write(k, at, from, bytes));
        }
        break;
      }
      default:
        break;
    }
  }
  return ncclSuccess;
}

// A call of at most kInlineBytes: every rank computes its whole result from
// the inputs in the slots' segment, in rank order (so every rank's result is
// the same bits). The next call uses the other payloads, and the one after
// starts only once every rank published the next (so had read these).
void moveInline(const Call& c, const HostDirect& d, uint64_t call) {
  const CollArgs& a = *c.a;
  const int n = c.n, me = c.me;
  const size_t bytes = a.count * c.esize;
  char* out = static_cast<char*>(a.recvbuff);
  int* order = c.order;
  const char** src = c.src;
  for (int k = 0; k < n; ++k) order[k] = k;
  switch (a.kind) {
    case CollKind::AllReduce:
    case CollKind::Reduce:
    case CollKind::ReduceScatter:
      if (a.kind == CollKind::Reduce && me != a.root) break;
      for (int k = 0; k < n; ++k)
        src[k] = d.payload(k, call) + (a.kind == CollKind::ReduceScatter ? me * bytes : 0);
      reduceChunk(c, order, src, a.count, out, nullptr);
      break;
    case CollKind::AllGather:
      for (int k = 0; k < n; ++k) memcpy(out + k * bytes, d.payload(k, call), bytes);
      break;
    case CollKind::Broadcast:
      if (out != a.sendbuff || me != a.root) memcpy(out, d.payload(a.root, call), bytes);
      break;
    default:
      break;
  }
}

}  // namespace

ncclResult_t hostDirectRun(const CollArgs& a, const Reducer& red, bool* ran) {
  *ran = false;
  ncclComm* comm = a.comm;
  HostDirect* d = comm->hostDirect.get();
  if (!d || a.onDevice || isP2p(a.kind) || a.count == 0) return ncclSuccess;
  const int n = comm->nranks, me = comm->rank;
  const size_t esize = typeSize(a.type);
  const size_t sendBytes = a.count * esize * (a.kind == CollKind::ReduceScatter ? n : 1);
  const size_t recvBytes = a.count * esize * (a.kind == CollKind::AllGather ? n : 1);
  // The sizes agree on every rank, so the ranks decide alike. The smallest
  // calls run inline: their inputs travel in the slots' segment, and one
  // barrier suffices. Calls between those and ACCL_DIRECT_MIN_BYTES take the
  // ring: as fast with a core per rank, and faster when ranks outnumber cores
  // (the direct path's two barriers then cost context switches).
  const int64_t largest = static_cast<int64_t>(std::max(sendBytes, recvBytes));
  const bool inlined = largest <= d->inlineBytes;
  if (!inlined && largest < d->minBytes) return ncclSuccess;
  // Each buffer that others touch, as the others find it: in a window that
  // every rank mapped, or at its address. Without anyBuffer only windows do,
  // and NCCL's contract for NCCL_WIN_COLL_SYMMETRIC makes every rank decide alike.
  int sendWin = -1, recvWin = -1;
  size_t sendAt = reinterpret_cast<uintptr_t>(a.sendbuff), recvAt = reinterpret_cast<uintptr_t>(a.recvbuff);
  if (!inlined && sharesSend(a.kind, me, a.root) &&
      !rmaFindSymmetric(comm, a.sendbuff, sendBytes, &sendWin, &sendAt) && !d->anyBuffer)
    return ncclSuccess;
  if (!inlined && sharesRecv(a.kind, me, a.root) &&
      !rmaFindSymmetric(comm, a.recvbuff, recvBytes, &recvWin, &recvAt) && !d->anyBuffer)
    return ncclSuccess;
  *ran = true;
  Slot& mine = d->slots[me];
  if (mine.failed.load()) {
    WARN("%s (%s, rank %d): an earlier direct collective of this communicator failed, or it was aborted", a.opName,
         comm->name.c_str(), me);
    return ncclInvalidUsage;
  }
  const uint64_t call = ++d->calls;
  // A failed call marks this rank stopped (the others leave their waits; the
  // slots no longer agree, so later direct calls fail too), then waits until
  // every rank left the call: a rank may still be writing into this rank's
  // output, which the caller may reuse once this returns. A rank that has not
  // published the call never touches a buffer of it: if it publishes later,
  // it sees this rank stopped before it moves anything (both sides seq_cst).
  auto fail = [&](ncclResult_t r) {
    mine.failed.store(1);
    mine.left.store(call);
    (void)waitAll(comm, *d, a.opName, "to leave",
                  [call](const Slot& s) { return s.left.load() >= call || s.published.load() < call; }, false);
    return r;
  };
  CallDesc& desc = mine.desc[call & 1];
  desc.kind = static_cast<int32_t>(a.kind);
  desc.root = a.root;
  desc.type = static_cast<int32_t>(a.type);
  desc.op = static_cast<int32_t>(red.kind);
  desc.bytes = a.count * esize;
  desc.sendWin = sendWin;
  desc.recvWin = recvWin;
  desc.sendAt = sendAt;
  desc.recvAt = recvAt;
  desc.scalar = red.scalar;
  if (inlined && (a.kind != CollKind::Broadcast || me == a.root)) memcpy(d->payload(me, call), a.sendbuff, sendBytes);
  mine.published.store(call);  // seq_cst: against fail()'s check of published
  ncclResult_t r = waitAll(comm, *d, a.opName, "to start",
                           [call](const Slot& s) { return s.published.load(std::memory_order_acquire) >= call; });
  if (r != ncclSuccess) return fail(r);

  // Every rank sees the same slots, so a differing call is ncclInvalidUsage
  // on every rank; checked before the failures, which come and go by rank.
  for (int k = 0; k < n; ++k) {
    const CallDesc& s = d->slots[k].desc[call & 1];
    if (s.kind != desc.kind || s.bytes != desc.bytes || s.root != desc.root || s.type != desc.type ||
        s.op != desc.op) {
      WARN("%s (%s, rank %d): rank %d runs %s of %llu bytes of %s, %s, root %d, where this rank runs %s of %llu "
           "bytes of %s, %s, root %d: every rank must make the same collective calls in the same order", a.opName,
           comm->name.c_str(), me, k, collName(static_cast<CollKind>(s.kind)),
           static_cast<unsigned long long>(s.bytes), typeName(static_cast<ncclDataType_t>(s.type)),
           opName(static_cast<OpKind>(s.op)), s.root, collName(a.kind), static_cast<unsigned long long>(desc.bytes),
           typeName(a.type), opName(red.kind), a.root);
      return fail(ncclInvalidUsage);
    }
  }
  if (!inlined) {
    std::fill(d->in.begin(), d->in.end(), Reach{});
    std::fill(d->out.begin(), d->out.end(), Reach{});
  }
  Call c{&a, &red, comm, n, me, esize, d->in.data(), d->out.data(), d->scalars.data(), d->order.data(), d->src.data()};
  int viaWindow = 0, viaAttach = 0, viaAddress = 0;  // other ranks' buffers, by how this rank reaches them
  // Rank k's buffer (window and offset, or address) as this rank reaches it.
  auto reach = [&](int k, int win, uint64_t at, Reach* to) {
    if (win >= 0) {
      char* base = rmaHostPeer(comm, win, k);
      if (!base) {
        WARN("%s (%s, rank %d): rank %d's buffer lies in window #%d, which is not registered here with "
             "NCCL_WIN_COLL_SYMMETRIC", a.opName, comm->name.c_str(), me, k, win);
        return false;
      }
      to->here = base + at;
      (sameProcess(comm, k) ? viaAddress : viaWindow) += k != me;
    } else if (sameProcess(comm, k)) {
      to->here = reinterpret_cast<char*>(at);
      viaAddress += k != me;
    } else if (d->anyBuffer) {
      to->there = at;
      ++viaAttach;
    } else {
      WARN("%s (%s, rank %d): rank %d's buffer is not in a window registered with NCCL_WIN_COLL_SYMMETRIC, where "
           "this rank's is (every rank's must be)", a.opName, comm->name.c_str(), me, k);
      return false;
    }
    return true;
  };
  for (int k = 0; k < n; ++k) {
    const Slot& s = d->slots[k];
    // It published, then failed or was stopped: its buffers may be in use
    // again. Unless it finished this inline call first: with no closing
    // barrier, a rank may finish one and destroy its communicator before this
    // one looks (its input stays in the segment). `left` would not do: a
    // failed call sets it too.
    if (s.failed.load() && !(inlined && s.finished.load() >= call)) {
      comm->failedRank.store(k);
      WARN("%s (%s, rank %d): rank %d stopped (its direct collective failed, or its communicator failed, was "
           "aborted or destroyed)", a.opName, comm->name.c_str(), me, k);
      return fail(ncclRemoteError);
    }
    const CallDesc& sd = s.desc[call & 1];
    c.scalars[k] = sd.scalar;
    if (inlined) continue;
    if ((sharesSend(a.kind, k, a.root) || k == me) && !reach(k, sd.sendWin, sd.sendAt, &c.in[k]))
      return fail(ncclInvalidUsage);
    if ((sharesRecv(a.kind, k, a.root) || k == me) && !reach(k, sd.recvWin, sd.recvAt, &c.out[k]))
      return fail(ncclInvalidUsage);
  }
  if (inlined) {
    if (!d->announcedInline) {
      d->announcedInline = true;
      INFO(kColl, "%s rank %d: %s runs inline (first such call): %zu bytes carried in the slots' segment",
           comm->name.c_str(), me, a.opName, static_cast<size_t>(largest));
    }
    moveInline(c, *d, call);
    mine.finished.store(call, std::memory_order_release);
    mine.left.store(call, std::memory_order_release);
    return ncclSuccess;
  }
  if (viaAttach > 0) {
    c.attached = true;
    c.chunkBytes = attachChunkBytes(n);
    d->scratch.resize((n + 1) * c.chunkBytes);
    c.scratch = d->scratch.data();
  }
  if (!d->announced) {
    d->announced = true;
    INFO(kColl, "%s rank %d: %s runs direct (first such call); other ranks' buffers: %d in windows mapped here, "
         "%d through cross memory attach, %d in this process", comm->name.c_str(), me, a.opName, viaWindow,
         viaAttach, viaAddress);
  }
  r = movePart(c);
  if (r != ncclSuccess) return fail(r);
  mine.finished.store(call, std::memory_order_release);
  r = waitAll(comm, *d, a.opName, "to finish",
              [call](const Slot& s) { return s.finished.load(std::memory_order_acquire) >= call; });
  if (r != ncclSuccess) return fail(r);
  mine.left.store(call, std::memory_order_release);
  return ncclSuccess;
}

}  // namespace accl
