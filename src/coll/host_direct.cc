// Direct collectives in host mode (coll/host_direct.h says what and when).
#include "coll/host_direct.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
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
// reduction into one output and the copies into the others.
constexpr size_t kChunkBytes = 32 << 10;

// A rank's slot, in the segment every rank maps (one cache line pair each).
struct alignas(128) Slot {
  std::atomic<uint64_t> published;  // the call whose buffers are below
  std::atomic<uint64_t> finished;   // the last call whose part this rank moved
  std::atomic<uint64_t> left;       // the last call this rank returned from (touches no buffer of it)
  std::atomic<int32_t> failed;      // this rank failed or stopped: the others leave their direct calls
  int32_t kind, root, type, op, sendWin, recvWin;
  uint64_t bytes, sendOff, recvOff;  // bytes: the call's count in bytes; offsets in the windows
  Scalar scalar;                     // this rank's PreMulSum scalar, for its own input
};
static_assert(sizeof(Slot) == 128, "one slot per 128 bytes");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "slots are shared between processes");

// Every rank on one host: what all ranks know alike. ACCL_DIRECT is each
// process's own, so it only decides what this rank reports (hostDirectAttach).
bool oneHost(const ncclComm* comm) {
  if (comm->nranks < 2) return false;
  for (const PeerInfo& p : comm->peers)
    if (p.hostHash != comm->peers[comm->rank].hostHash) return false;
  return true;
}

size_t segmentBytes(int n) { return static_cast<size_t>(n) * sizeof(Slot); }
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

}  // namespace

class HostDirect {
 public:
  // `owner`: the segment's name, which this rank made and unlinks at the latest here.
  HostDirect(ncclComm* comm, void* map, size_t bytes, std::string owner = {})
      : slots(static_cast<Slot*>(map)), comm_(comm), bytes_(bytes), owner_(std::move(owner)) {
    comm_->directStopWord.store(&slots[comm->rank].failed);
  }
  ~HostDirect() {
    comm_->directStopWord.store(nullptr);
    munmap(slots, bytes_);
    if (!owner_.empty()) shm_unlink(owner_.c_str());
  }

  Slot* slots;
  uint64_t calls = 0;  // direct calls this rank made

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

void hostDirectPrepare(ncclComm* comm, HostDirectPtr* state) {
  if (*state || comm->rank != 0 || !oneHost(comm) || paramInt(Param::Direct) == 0) return;
  void* map = nullptr;
  const size_t bytes = segmentBytes(comm->nranks);
  if (shmSegmentCreate(comm, 0, segmentName(comm), bytes, &map) != ncclSuccess) return;  // WARNed: the ring
  memset(map, 0, bytes);
  state->reset(new HostDirect(comm, map, bytes, segmentName(comm)));
}

ncclResult_t hostDirectAttach(ncclComm* comm, HostDirectPtr* state, ncclWindow_vidmem* win,
                              const std::vector<HostDirectExport>& all) {
  if (!oneHost(comm)) return ncclSuccess;
  const int n = comm->nranks, me = comm->rank;
  int32_t unreached = -1;  // the rank whose part this rank cannot reach (this one: no slots)
  if (!*state && me != 0) {  // rank 0 made the segment before the registration's allgather
    void* map = nullptr;
    const size_t bytes = segmentBytes(n);
    if (shmSegmentOpen(comm, 0, segmentName(comm), bytes, &map) == ncclSuccess) state->reset(new HostDirect(comm, map, bytes));
  }
  if (!*state || paramInt(Param::Direct) == 0) unreached = me;
  std::vector<char*> bases(n, nullptr);
  const int32_t pid = static_cast<int32_t>(getpid());
  for (int q = 0; q < n && unreached < 0; ++q) {
    const HostDirectExport& e = all[q];
    if (e.bytes == 0) continue;  // no window on rank q: its buffers are never shared
    if (q == me) {
      bases[q] = static_cast<char*>(win->base);
    } else if (e.share.pid == pid) {  // a rank of this process
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
  if (me == 0) shm_unlink(segmentName(comm).c_str());  // every rank opened it before the allgather
  int who = 0;
  while (who < n && unreachedBy[who] < 0) ++who;
  if (r != ncclSuccess || who < n) {
    hostDirectDetach(win);
    if (r == ncclSuccess && unreachedBy[who] == who)
      INFO(kInit, "%s rank %d: window #%d: collectives on it take the ring: rank %d runs no direct collectives "
           "(ACCL_DIRECT=0 there, or no shared slots)", comm->name.c_str(), me, win->index, who);
    else if (r == ncclSuccess)
      INFO(kInit, "%s rank %d: window #%d: collectives on it take the ring: rank %d cannot reach rank %d's part "
           "(windows of other processes must be ncclMemAlloc memory)", comm->name.c_str(), me, win->index, who,
           unreachedBy[who]);
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

// The buffers of one call: every rank's input and output as this process
// reaches them (NULL where no other rank touches them), and scalars.
struct Call {
  const CollArgs* a;
  const Reducer* red;
  int n, me;
  size_t esize;
  std::vector<const char*> in;
  std::vector<char*> out;
  std::vector<Scalar> scalars;
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
        WARN("%s (%s, rank %d): rank %d stopped (its direct collective failed, or its communicator failed or was "
             "aborted)", op, comm->name.c_str(), comm->rank, k);
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

// acc <- the reduction of the inputs in `order` at element `off`, for `len`
// elements, finished; also copied to `also` when not NULL. `order` starts with
// the input that acc may alias (in place), so it is read before acc is written.
void reduceChunk(const Call& c, const int* order, size_t off, size_t len, char* acc, char* also) {
  const Reducer& red = *c.red;
  const size_t at = off * c.esize;
  const char* partial = c.in[order[0]] + at;
  if (red.k.prepare) {
    red.k.prepare(acc, partial, len, &c.scalars[order[0]]);
    partial = acc;
  }
  for (int j = 1; j < c.n; ++j) {
    const int k = order[j];
    if (j == c.n - 1 && also && red.k.combine2 && !red.k.finish) {
      red.k.combine2(acc, also, partial, c.in[k] + at, len, &c.scalars[k]);
      return;
    }
    red.k.combine(acc, partial, c.in[k] + at, len, &c.scalars[k]);
    partial = acc;
  }
  red.finish(acc, len);
  if (also) memcpy(also, acc, len * c.esize);
}

void copyTo(char* dst, const char* src, size_t bytes) {
  if (dst != src) memcpy(dst, src, bytes);
}

// This rank's part of the collective.
void movePart(const Call& c) {
  const CollArgs& a = *c.a;
  const int n = c.n, me = c.me;
  const size_t es = c.esize, chunk = std::max<size_t>(1, kChunkBytes / es);
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
  std::vector<int> order(n);
  const int first = a.kind == CollKind::Reduce ? a.root : me;
  for (int j = 0; j < n; ++j) order[j] = (first + j) % n;
  for (size_t off = lo; off < hi; off += chunk) {
    const size_t len = std::min(chunk, hi - off), bytes = len * es;
    switch (a.kind) {
      case CollKind::AllReduce: {
        char* acc = c.out[me] + off * es;
        reduceChunk(c, order.data(), off, len, acc, c.out[(me + 1) % n] + off * es);
        for (int j = 2; j < n; ++j) memcpy(c.out[(me + j) % n] + off * es, acc, bytes);
        break;
      }
      case CollKind::Reduce:
        reduceChunk(c, order.data(), off, len, c.out[a.root] + off * es, nullptr);
        break;
      case CollKind::ReduceScatter:  // block me of every input, into rank me's output
        reduceChunk(c, order.data(), me * a.count + off, len, c.out[me] + off * es, nullptr);
        break;
      case CollKind::AllGather:
        for (int j = 0; j < n; ++j) copyTo(c.out[(me + j) % n] + (me * a.count + off) * es, c.in[me] + off * es, bytes);
        break;
      case CollKind::Broadcast:
        for (int j = 0; j < n; ++j) copyTo(c.out[(me + j) % n] + off * es, c.in[a.root] + off * es, bytes);
        break;
      default:
        break;
    }
  }
}

}  // namespace

ncclResult_t hostDirectRun(const CollArgs& a, const Reducer& red, bool* ran) {
  *ran = false;
  ncclComm* comm = a.comm;
  HostDirect* d = rmaHostDirect(comm);
  if (!d || a.onDevice || isP2p(a.kind) || a.count == 0) return ncclSuccess;
  const int n = comm->nranks, me = comm->rank;
  const size_t esize = typeSize(a.type);
  const size_t sendBytes = a.count * esize * (a.kind == CollKind::ReduceScatter ? n : 1);
  const size_t recvBytes = a.count * esize * (a.kind == CollKind::AllGather ? n : 1);
  // Small calls take the ring: as fast with a core per rank, and faster when
  // ranks outnumber cores (two barriers then cost context switches). The
  // sizes agree on every rank, so the ranks decide alike.
  if (static_cast<int64_t>(std::max(sendBytes, recvBytes)) < paramInt(Param::DirectMinBytes)) return ncclSuccess;
  int sendWin = -1, recvWin = -1;
  size_t sendOff = 0, recvOff = 0;
  // NCCL's contract for NCCL_WIN_COLL_SYMMETRIC makes every rank decide alike.
  if (sharesSend(a.kind, me, a.root) && !rmaFindSymmetric(comm, a.sendbuff, sendBytes, &sendWin, &sendOff))
    return ncclSuccess;
  if (sharesRecv(a.kind, me, a.root) && !rmaFindSymmetric(comm, a.recvbuff, recvBytes, &recvWin, &recvOff))
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
  mine.kind = static_cast<int32_t>(a.kind);
  mine.root = a.root;
  mine.type = static_cast<int32_t>(a.type);
  mine.op = static_cast<int32_t>(red.kind);
  mine.bytes = a.count * esize;
  mine.sendWin = sendWin;
  mine.recvWin = recvWin;
  mine.sendOff = sendOff;
  mine.recvOff = recvOff;
  mine.scalar = red.scalar;
  mine.published.store(call);  // seq_cst: against fail()'s check of published
  ncclResult_t r = waitAll(comm, *d, a.opName, "to start",
                           [call](const Slot& s) { return s.published.load(std::memory_order_acquire) >= call; });
  if (r != ncclSuccess) return fail(r);

  // Every rank sees the same slots, so a differing call is ncclInvalidUsage
  // on every rank; checked before the failures, which come and go by rank.
  for (int k = 0; k < n; ++k) {
    const Slot& s = d->slots[k];
    if (s.kind != mine.kind || s.bytes != mine.bytes || s.root != mine.root || s.type != mine.type ||
        s.op != mine.op) {
      WARN("%s (%s, rank %d): rank %d runs %s of %llu bytes of %s, %s, root %d, where this rank runs %s of %llu "
           "bytes of %s, %s, root %d: every rank must make the same collective calls in the same order", a.opName,
           comm->name.c_str(), me, k, collName(static_cast<CollKind>(s.kind)),
           static_cast<unsigned long long>(s.bytes), typeName(static_cast<ncclDataType_t>(s.type)),
           opName(static_cast<OpKind>(s.op)), s.root, collName(a.kind), static_cast<unsigned long long>(mine.bytes),
           typeName(a.type), opName(red.kind), a.root);
      return fail(ncclInvalidUsage);
    }
  }
  Call c{&a, &red, n, me, esize, std::vector<const char*>(n), std::vector<char*>(n), std::vector<Scalar>(n)};
  for (int k = 0; k < n; ++k) {
    const Slot& s = d->slots[k];
    if (s.failed.load()) {  // it published, then failed or was stopped: its buffers may be in use again
      comm->failedRank.store(k);
      WARN("%s (%s, rank %d): rank %d stopped (its direct collective failed, or its communicator failed or was "
           "aborted)", a.opName, comm->name.c_str(), me, k);
      return fail(ncclRemoteError);
    }
    c.scalars[k] = s.scalar;
    if (k == me) {
      c.in[k] = static_cast<const char*>(a.sendbuff);
      c.out[k] = static_cast<char*>(a.recvbuff);
      continue;
    }
    // Rank k's window as mapped here, plus its offset (NULL where nobody else touches the buffer).
    const bool sharedIn = sharesSend(a.kind, k, a.root), sharedOut = sharesRecv(a.kind, k, a.root);
    char* const in = sharedIn ? rmaHostPeer(comm, s.sendWin, k) : nullptr;
    char* const out = sharedOut ? rmaHostPeer(comm, s.recvWin, k) : nullptr;
    if ((sharedIn && !in) || (sharedOut && !out)) {
      WARN("%s (%s, rank %d): rank %d's buffer is not in a window registered here with NCCL_WIN_COLL_SYMMETRIC",
           a.opName, comm->name.c_str(), me, k);
      return fail(ncclInvalidUsage);
    }
    c.in[k] = in ? in + s.sendOff : nullptr;
    c.out[k] = out ? out + s.recvOff : nullptr;
  }
  movePart(c);
  mine.finished.store(call, std::memory_order_release);
  r = waitAll(comm, *d, a.opName, "to finish",
              [call](const Slot& s) { return s.finished.load(std::memory_order_acquire) >= call; });
  if (r != ncclSuccess) return fail(r);
  mine.left.store(call, std::memory_order_release);
  return ncclSuccess;
}

}  // namespace accl
