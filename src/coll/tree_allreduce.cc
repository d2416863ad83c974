// Double binary tree allreduce: tree 0 reduces and broadcasts the first half
// of the buffer, tree 1 the second. In each tree, chunks are reduced up to the
// root (inner nodes combine their children's partials with their own input)
// and broadcast back down. Both trees and both directions are pipelined: at
// iteration i a rank moves chunk i up each tree and chunk i-kLag down, so no
// rank waits on a later iteration of another and there is no deadlock.
//
// With two ranks the tree is one exchange: each rank sends its whole input to
// the other and reduces both, one hop of latency where the ring and a tree of
// two levels take two.
#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "coll/coll.h"
#include "coll/steps.h"
#include "coll/tree.h"
#include "core/comm.h"
#include "transport/connection.h"

namespace accl {
namespace {

constexpr size_t kLag = 2;

struct Part {  // the part of the buffer one tree handles
  const Tree* tree;
  const char* src;
  char* dst;
  size_t elems;
};

class TreeRun {
 public:
  TreeRun(ncclComm* comm, const CollArgs& a, const Reducer& red)
      : comm_(comm), steps_(comm, a.opName), red_(red), esize_(typeSize(a.type)) {}

  size_t chunkElems(const Tree& t) const {
    size_t slot = static_cast<size_t>(-1);
    for (Connection* c : {t.up, t.fromParent, t.down[0], t.down[1], t.fromChild[0], t.fromChild[1]})
      if (c && c->fifo.slotBytes < slot) slot = c->fifo.slotBytes;
    return slot / esize_;
  }

  // Chunk [off, off+n) of part p towards the root.
  ncclResult_t up(const Part& p, size_t off, size_t n) {
    const Tree& t = *p.tree;
    const size_t bytes = n * esize_;
    const char* in = p.src + off * esize_;
    char* out = p.dst + off * esize_;
    const char* kid[2] = {nullptr, nullptr};
    for (int k = 0; k < 2; ++k)
      if (t.fromChild[k]) NCCLCHECK(steps_.waitRecv(t.fromChild[k], bytes, &kid[k]));
    char* acc = out;  // the root accumulates into the output; others into the parent's slot
    if (t.up) NCCLCHECK(steps_.waitSend(t.up, &acc));
    if (!kid[0] && !kid[1]) {
      red_.prepare(acc, in, n, esize_);
    } else {
      red_.combine(acc, kid[0] ? kid[0] : kid[1], in, n);
      if (kid[0] && kid[1]) red_.merge(acc, kid[1], acc, n);
    }
    for (int k = 0; k < 2; ++k)
      if (kid[k]) steps_.release(t.fromChild[k]);
    if (t.up) steps_.post(t.up, bytes);
    else red_.finish(out, n);
    return ncclSuccess;
  }

  // Chunk [off, off+n) of part p from the root to the leaves.
  ncclResult_t down(const Part& p, size_t off, size_t n) {
    const Tree& t = *p.tree;
    const size_t bytes = n * esize_;
    char* out = p.dst + off * esize_;
    const char* data = out;  // the root already holds the result
    if (t.fromParent) {
      NCCLCHECK(steps_.waitRecv(t.fromParent, bytes, &data));
      memcpy(out, data, bytes);
    }
    for (int k = 0; k < 2; ++k) {
      if (!t.down[k]) continue;
      char* slot;
      NCCLCHECK(steps_.waitSend(t.down[k], &slot));
      memcpy(slot, data, bytes);
      steps_.post(t.down[k], bytes);
    }
    if (t.fromParent) steps_.release(t.fromParent);
    return ncclSuccess;
  }

 private:
  ncclComm* comm_;
  Steps steps_;
  const Reducer& red_;
  size_t esize_;
};

// Two ranks, over the ring's connections (both to the peer), a slot at a
// time; chunk i goes out kExchangeLag chunks before chunk i comes in, so the
// wire stays busy while a rank reduces. Both reduce in rank order (rank 0's
// data first): min and max are not commutative for NaNs and signed zeros,
// and both ranks must get the same bits.
constexpr size_t kExchangeLag = kSlots / 2;

ncclResult_t exchangeAllReduce(const CollArgs& a, const Reducer& red) {
  ncclComm* comm = a.comm;
  Connection* send = comm->ring.send.get();
  Connection* recv = comm->ring.recv.get();
  Steps steps(comm, a.opName);
  const size_t esize = typeSize(a.type);
  const size_t chunk = std::min(send->fifo.slotBytes, recv->fifo.slotBytes) / esize;
  const size_t nchunks = (a.count + chunk - 1) / chunk;
  const char* src = static_cast<const char*>(a.sendbuff);
  char* dst = static_cast<char*>(a.recvbuff);
  auto elems = [&](size_t i) { return std::min(chunk, a.count - i * chunk); };
  // A socket sends the input from where it is, unless PreMulSum changes it
  // first; in place, chunk j is then overwritten only once it has left.
  const bool fromInput = send->sendsFromMemory() && !red.k.prepare;
  const uint64_t firstStep = send->step;
  for (size_t i = 0; i < nchunks + kExchangeLag; ++i) {
    if (i < nchunks) {
      char* slot;
      NCCLCHECK(steps.waitSend(send, &slot));
      if (!fromInput || !steps.postFrom(send, src + i * chunk * esize, elems(i) * esize)) {
        red.prepare(slot, src + i * chunk * esize, elems(i), esize);
        steps.post(send, elems(i) * esize);
      }
    }
    if (i < kExchangeLag) continue;
    const size_t j = i - kExchangeLag, n = elems(j);
    char* out = dst + j * chunk * esize;  // in place: chunk j went out already (copied, or waited for below)
    const char* own = src + j * chunk * esize;
    const char* peer;
    NCCLCHECK(steps.waitRecv(recv, n * esize, &peer));
    if (fromInput && out == own) NCCLCHECK(steps.waitSent(send, firstStep + j + 1));
    if (red.k.prepare) {  // PreMulSum: this rank's scalar on its own input first
      red.prepare(out, own, n, esize);
      own = out;
    }
    if (comm->rank == 0)
      red.merge(out, own, peer, n);
    else
      red.merge(out, peer, own, n);
    red.finish(out, n);
    steps.release(recv);
  }
  // The input goes back to the caller: every frame sent from it has left.
  NCCLCHECK(steps.waitAllSent());
  return ncclSuccess;
}

}  // namespace

ncclResult_t treeAllReduce(const CollArgs& a, const Reducer& red) {
  ncclComm* comm = a.comm;
  if (comm->nranks == 1) return ringAllReduce(a, red, commRing(comm));
  if (comm->nranks == 2) return exchangeAllReduce(a, red);
  NCCLCHECK(setupTrees(comm));
  const size_t esize = typeSize(a.type);
  const size_t align = std::max<size_t>(1, 64 / esize);
  size_t half = std::min(a.count, (a.count / 2 + align - 1) / align * align);
  const char* src = static_cast<const char*>(a.sendbuff);
  char* dst = static_cast<char*>(a.recvbuff);
  Part parts[2] = {{&comm->trees[0], src, dst, half},
                   {&comm->trees[1], src + half * esize, dst + half * esize, a.count - half}};
  TreeRun run(comm, a, red);
  size_t chunk[2] = {run.chunkElems(*parts[0].tree), run.chunkElems(*parts[1].tree)};
  size_t nchunks[2] = {(parts[0].elems + chunk[0] - 1) / chunk[0], (parts[1].elems + chunk[1] - 1) / chunk[1]};
  const size_t iters = std::max(nchunks[0], nchunks[1]) + kLag;
  for (size_t i = 0; i < iters; ++i) {
    for (int t = 0; t < 2; ++t)
      if (i < nchunks[t]) {
        size_t off = i * chunk[t];
        NCCLCHECK(run.up(parts[t], off, std::min(chunk[t], parts[t].elems - off)));
      }
    for (int t = 0; t < 2; ++t)
      if (i >= kLag && i - kLag < nchunks[t]) {
        size_t off = (i - kLag) * chunk[t];
        NCCLCHECK(run.down(parts[t], off, std::min(chunk[t], parts[t].elems - off)));
      }
  }
  return ncclSuccess;
}

}  // namespace accl
