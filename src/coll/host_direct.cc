// Direct collectives in host mode: the calls (coll/host_direct.h says what
// and when; host_direct_setup.cc makes the state they use).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "coll/cross_copy.h"
#include "coll/host_direct_state.h"
#include "coll/host_direct_wait.h"
#include "coll/rma.h"
#include "core/comm.h"

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

// Whether an inline call of kind c on rank me reads rank k's input: a
// reduce's or gather's root reads every rank's, a broadcast's or scatter's
// other ranks the root's, every rank of the other collectives every rank's.
bool readsInline(CollKind c, int me, int k, int root) {
  switch (c) {
    case CollKind::Reduce:
    case CollKind::Gather:
      return me == root;
    case CollKind::Broadcast:
    case CollKind::Scatter:
      return me != root && k == root;
    default:
      return true;
  }
}

// CallDesc::sig after one more call: what every rank must agree on (as the
// descriptions are compared), mixed into the running value.
uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t nextSig(uint64_t sig, const CollArgs& a, const Reducer& red, size_t esize) {
  const uint64_t what = static_cast<uint64_t>(static_cast<uint8_t>(a.kind)) |
                        static_cast<uint64_t>(static_cast<uint8_t>(a.type)) << 8 |
                        static_cast<uint64_t>(static_cast<uint8_t>(red.kind)) << 16 |
                        static_cast<uint64_t>(static_cast<uint32_t>(a.root)) << 32;
  return mix64(mix64(sig ^ what) ^ (a.count * esize));
}

// A PreMulSum scalar in one word (CallDesc::scalar), and back.
uint64_t packScalar(ncclDataType_t type, const Scalar& s) {
  uint64_t w;
  if (typeIsFloating(type)) memcpy(&w, &s.f, sizeof(w));
  else memcpy(&w, &s.i, sizeof(w));
  return w;
}
Scalar unpackScalar(ncclDataType_t type, uint64_t w) {
  Scalar s;
  if (typeIsFloating(type)) memcpy(&s.f, &w, sizeof(w));
  else memcpy(&s.i, &w, sizeof(w));
  return s;
}

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
  char* scratch = nullptr;  // n + 1 chunks of chunkBytes, when some buffer is reached through cross memory attach
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
    size_t done = 0;
    const int err = crossCopy(comm->peers[k].pid, toPeer, addr, local, bytes, &done);
    if (err == 0) return ncclSuccess;
    if (err == ESRCH) {
      commNoteFailedRank(comm, k);
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
// the same bits). These payloads are used again kDescs calls later, once
// every rank finished this one.
void moveInline(const Call& c, const HostDirect& d, uint64_t call, size_t sendBytes) {
  const CollArgs& a = *c.a;
  const int n = c.n, me = c.me;
  const size_t bytes = a.count * c.esize;
  auto input = [&](int k) -> const char* {
    return sendBytes <= kSmallBytes ? d.slots[k].desc[call % kDescs].small : d.payload(k, call);
  };
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
        src[k] = input(k) + (a.kind == CollKind::ReduceScatter ? me * bytes : 0);
      reduceChunk(c, order, src, a.count, out, nullptr);
      break;
    case CollKind::AllGather:
      for (int k = 0; k < n; ++k) memcpy(out + k * bytes, input(k), bytes);
      break;
    case CollKind::Broadcast:
      if (out != a.sendbuff || me != a.root) memcpy(out, input(a.root), bytes);
      break;
    case CollKind::AllToAll:  // block me of every rank's input
      for (int k = 0; k < n; ++k) memcpy(out + k * bytes, input(k) + me * bytes, bytes);
      break;
    case CollKind::Gather:
      for (int k = 0; me == a.root && k < n; ++k) memcpy(out + k * bytes, input(k), bytes);
      break;
    case CollKind::Scatter:
      memcpy(out, input(a.root) + me * bytes, bytes);
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
  d->sig = nextSig(d->sig, a, red, esize);  // every rank counts every call, whichever path it takes
  const bool allToAll = a.kind == CollKind::AllToAll;
  const size_t sendBytes =
      a.count * esize * (allToAll || a.kind == CollKind::ReduceScatter || a.kind == CollKind::Scatter ? n : 1);
  const size_t recvBytes =
      a.count * esize * (allToAll || a.kind == CollKind::AllGather || a.kind == CollKind::Gather ? n : 1);
  // The sizes agree on every rank, so the ranks decide alike. The smallest
  // calls run inline: their inputs travel in the slots' segment, and one
  // barrier suffices. Calls between those and ACCL_DIRECT_MIN_BYTES take the
  // ring: as fast with a core per rank, and faster when ranks outnumber cores
  // (the direct path's two barriers then cost context switches). All-to-all,
  // gather and scatter have no direct path: beyond inline they are sends and
  // receives.
  const int64_t largest = static_cast<int64_t>(std::max(sendBytes, recvBytes));
  const bool inlined = largest <= d->inlineBytes;
  if (!inlined && (largest < d->minBytes || runsAsSendRecv(a.kind))) return ncclSuccess;
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
  // it sees this rank stopped before it moves anything (both sides seq_cst:
  // a direct call publishes seq_cst on every rank, since every rank decides
  // alike). (Inline calls publish with release and go on once the
  // descriptions they read hold the call; they write no other rank's buffer,
  // only their own.)
  auto fail = [&](ncclResult_t r) {
    mine.failed.store(1);
    mine.left.store(call);
    (void)waitAll(comm, *d, a.opName, "to leave",
                  [call](const Slot& s) { return s.left.load() >= call || s.published.load() < call; }, false);
    return r;
  };
  // Call - kDescs used this description and payload: every rank must be
  // done with it. (The last value read of each rank's `finished` mostly says so.)
  if (call > static_cast<uint64_t>(kDescs)) {
    const uint64_t need = call - kDescs;
    ncclResult_t r = waitAll(comm, *d, a.opName, "to finish an earlier call", [d, need](const Slot& s) {
      uint64_t& seen = d->seenFinished[&s - d->slots];
      if (seen < need) seen = s.finished.load(std::memory_order_acquire);
      return seen >= need;
    });
    if (r != ncclSuccess) return fail(r);
  }
  CallDesc& desc = mine.desc[call % kDescs];
  desc.kind = static_cast<int8_t>(a.kind);
  desc.root = a.root;
  desc.type = static_cast<int8_t>(a.type);
  desc.op = static_cast<int8_t>(red.kind);
  desc.bytes = a.count * esize;
  desc.scalar = packScalar(a.type, red.scalar);
  desc.sig = d->sig;
  if (!inlined) {
    desc.where = CallDesc::Where{sendWin, recvWin, sendAt, recvAt};
  } else if ((a.kind != CollKind::Broadcast && a.kind != CollKind::Scatter) || me == a.root) {
    memcpy(sendBytes <= kSmallBytes ? desc.small : d->payload(me, call), a.sendbuff, sendBytes);
  }
  desc.call.store(call, std::memory_order_release);
  // seq_cst for direct calls: against fail()'s check of published. Inline
  // calls touch no other rank's buffer; without the fence a rank that waits
  // for no other does not stall here on the cache lines the others read.
  mine.published.store(call, inlined ? std::memory_order_release : std::memory_order_seq_cst);
  // Inline calls wait on the descriptions, which hold all they read of a
  // small call, and only on those of the ranks whose input they read: a
  // reduce's or gather's root on every rank, a broadcast's or scatter's other
  // ranks on the root, the others on every rank. Direct calls wait for every
  // rank's `published`.
  auto reads = [&](int k) { return !inlined || readsInline(a.kind, me, k, a.root); };
  const int p = call % kDescs;
  ncclResult_t r = inlined ? waitAll(comm, *d, a.opName, "to start", [&, call, p](const Slot& s) {
    return !reads(static_cast<int>(&s - d->slots)) || s.desc[p].call.load(std::memory_order_acquire) >= call;
  }) : waitAll(comm, *d, a.opName, "to start", [call](const Slot& s) {
    return s.published.load(std::memory_order_acquire) >= call;
  });
  if (r != ncclSuccess) return fail(r);

  // Every rank sees the same slots, so a differing call is ncclInvalidUsage
  // on every rank that reads the rank that differs, and a difference in an
  // earlier call that no rank read (the signatures) on every rank that reads
  // at its next call; the others learn that those stopped (below). Checked
  // before the failures, which come and go by rank.
  for (int k = 0; k < n; ++k) {
    if (!reads(k)) continue;
    const CallDesc& s = d->slots[k].desc[p];
    if (s.kind != desc.kind || s.bytes != desc.bytes || s.root != desc.root || s.type != desc.type ||
        s.op != desc.op) {  // the same size on every rank: the same place for small inputs
      WARN("%s (%s, rank %d): rank %d runs %s of %llu bytes of %s, %s, root %d, where this rank runs %s of %llu "
           "bytes of %s, %s, root %d: every rank must make the same collective calls in the same order", a.opName,
           comm->name.c_str(), me, k, collName(static_cast<CollKind>(s.kind)),
           static_cast<unsigned long long>(s.bytes), typeName(static_cast<ncclDataType_t>(s.type)),
           opName(static_cast<OpKind>(s.op)), s.root, collName(a.kind), static_cast<unsigned long long>(desc.bytes),
           typeName(a.type), opName(red.kind), a.root);
      return fail(ncclInvalidUsage);
    }
    if (s.sig != desc.sig) {
      WARN("%s (%s, rank %d): rank %d made other collective calls than this rank before this one (a call that "
           "differed where no rank compared it, such as a broadcast with another root, or a call one rank did not "
           "make): every rank must make the same collective calls in the same order", a.opName, comm->name.c_str(),
           me, k);
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
    // It failed or was stopped: its buffers may be in use again, and if this
    // rank does not read it, this is where it learns of it (a rarely written
    // line, so a cheap look). Unless it finished this inline call first: with
    // no closing barrier, a rank may finish one and destroy its communicator
    // before this one looks (its input stays in the segment). `left` would
    // not do: a failed call sets it too.
    if (s.failed.load() && !(inlined && s.finished.load() >= call)) {
      commNoteFailedRank(comm, k);
      WARN("%s (%s, rank %d): rank %d stopped (its direct collective failed, or its communicator failed, was "
           "aborted or destroyed)", a.opName, comm->name.c_str(), me, k);
      return fail(ncclRemoteError);
    }
    if (!reads(k)) continue;
    const CallDesc& sd = s.desc[p];
    c.scalars[k] = unpackScalar(a.type, sd.scalar);
    if (inlined) continue;
    if ((sharesSend(a.kind, k, a.root) || k == me) && !reach(k, sd.where.sendWin, sd.where.sendAt, &c.in[k]))
      return fail(ncclInvalidUsage);
    if ((sharesRecv(a.kind, k, a.root) || k == me) && !reach(k, sd.where.recvWin, sd.where.recvAt, &c.out[k]))
      return fail(ncclInvalidUsage);
  }
  if (inlined) {
    if (!d->announcedInline) {
      d->announcedInline = true;
      INFO(kColl, "%s rank %d: %s runs inline (first such call): %zu bytes carried in the slots' segment",
           comm->name.c_str(), me, a.opName, static_cast<size_t>(largest));
    }
    moveInline(c, *d, call, sendBytes);
    mine.finished.store(call, std::memory_order_release);
    mine.left.store(call, std::memory_order_release);
    return ncclSuccess;
  }
  if (viaAttach > 0) {
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
