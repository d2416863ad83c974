// Direct collectives of the CUDA executor: the ranks on one GPU (of one
// process, or of several with symmetric windows) read each other's inputs and write each other's outputs, so every byte is
// read and written once, as the HBM bound counts it (the ring moves it through
// connector slots: twice the traffic).
//
// A call: block 0 publishes this rank's buffers in its slot (dev_types.h
// DevDirectSlot) and every block waits until every rank published the same
// call; then each rank reduces the part it owns, over all inputs, into all
// outputs; every block counts itself finished, and block 0 waits until every
// rank's blocks did, so that when a rank's kernel ends, its output is complete
// and no peer reads its buffers any more. In place is safe: a part of every
// buffer is read and written by its owner alone, reads first. All-to-all,
// gather and scatter run so for ranks of one process only. Each rank moves
// its own block of a gather or scatter; an all-to-all has no owner per part:
// each pair of ranks swaps its two blocks, half each (exchangePair).
#pragma once

#include "device/dev_prims.cuh"

namespace accl {
namespace {

// This block among the blocks that share one rank's part of a direct call.
// They interleave: block b takes packs [b, b + 1) x kThreads x U, then skips
// the others' (nb x kThreads x U), so the blocks sweep the part together. A
// 64 MiB copy so took 50.4 us on the H100 where one contiguous slice per block
// took 54.0 (256 MiB: 190 against 209; cudaMemcpy 47.7 and 180).
struct Share {
  int b, nb;
};
// The bytes one block moves in one step (a tile) of copyN and exchangePair.
constexpr size_t kCopyTile = 8 * kThreads * 16, kExchangeTile = 4 * kThreads * 16;

// out[j][outOff + i] <- fin(in[0] combined with in[1..nin-1], at inOff + i)
// for i < len and every j < nout, by the blocks of `sh`, all threads. PreMulSum
// scales each input by its own rank's scalar (ks[k]), as each rank's op says.
// The tables are in shared memory; inputs are read through L2.
template <typename T, DevOp K>
__device__ __noinline__ void reduceN(Red<T, K> r, const T* const* in, const T* ks, int nin, size_t inOff,
                                     T* const* out, int nout, size_t outOff, size_t len, Share sh) {
  auto fold = [&](T acc, T v, int k) {
    if constexpr (K == DevOp::PreMulSum) {
      const T t = OpProd<T>()(v, ks[k]);
      return k == 0 ? t : OpSum<T>()(acc, t);
    } else {
      return k == 0 ? r.pre(v) : r.comb(acc, v);
    }
  };
  constexpr int E = 16 / sizeof(T);
  constexpr int U = IsLowp<T>::value ? 1 : 4;  // packs in flight per thread
  bool aligned = true;
  for (int k = 0; k < nin; ++k) aligned &= (reinterpret_cast<uintptr_t>(in[k] + inOff) & 15) == 0;
  for (int k = 0; k < nout; ++k) aligned &= (reinterpret_cast<uintptr_t>(out[k] + outOff) & 15) == 0;
  size_t done = 0;
  if (aligned) {
    const size_t packs = len / E;
    for (size_t i = sh.b * U * kThreads + threadIdx.x; i < packs; i += sh.nb * U * kThreads) {
      T acc[U][E];
      // Two inputs' loads in flight at once: the loop is bound by memory latency.
      for (int k = 0; k < nin; k += 2) {
        const bool two = k + 1 < nin;
        const uint4* a = reinterpret_cast<const uint4*>(in[k] + inOff);
        const uint4* b = reinterpret_cast<const uint4*>(in[two ? k + 1 : k] + inOff);
        uint4 va[U], vb[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const size_t j = i + u * kThreads;
          if (j < packs) {
            va[u] = __ldcg(a + j);
            if (two) vb[u] = __ldcg(b + j);
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          T e[E];
          memcpy(e, &va[u], 16);
#pragma unroll
          for (int x = 0; x < E; ++x) acc[u][x] = fold(acc[u][x], e[x], k);
          if (two) {
            memcpy(e, &vb[u], 16);
#pragma unroll
            for (int x = 0; x < E; ++x) acc[u][x] = fold(acc[u][x], e[x], k + 1);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const size_t j = i + u * kThreads;
        if (j >= packs) break;
        T o[E];
#pragma unroll
        for (int x = 0; x < E; ++x) o[x] = r.fin(acc[u][x]);
        uint4 ov;
        memcpy(&ov, o, 16);
        for (int m = 0; m < nout; ++m) reinterpret_cast<uint4*>(out[m] + outOff)[j] = ov;
      }
    }
    done = packs * E;
  }
  for (size_t i = done + sh.b * kThreads + threadIdx.x; i < len; i += sh.nb * kThreads) {
    T acc = fold(T{}, loadCg(in[0] + inOff + i), 0);
    for (int k = 1; k < nin; ++k) acc = fold(acc, loadCg(in[k] + inOff + i), k);
    const T x = r.fin(acc);
    for (int m = 0; m < nout; ++m) out[m][outOff + i] = x;
  }
}

// out[j][outOff + i] <- in[inOff + i] for i < len and every j < nout, by the
// blocks of `sh`, all threads: the collectives that only move bytes. Eight
// 16-byte packs in flight per thread; loads and stores marked streaming
// (evict first: each byte is touched once). The loads may be served from L1:
// no source of a direct call is written while the call runs.
template <typename T>
__device__ __noinline__ void copyN(const T* in, size_t inOff, T* const* out, int nout, size_t outOff, size_t len,
                                   Share sh) {
  constexpr int U = kCopyTile / kThreads / 16;
  const char* src = reinterpret_cast<const char*>(in + inOff);
  const size_t bytes = len * sizeof(T);
  bool aligned = (reinterpret_cast<uintptr_t>(src) & 15) == 0;
  for (int m = 0; m < nout; ++m) aligned &= (reinterpret_cast<uintptr_t>(out[m] + outOff) & 15) == 0;
  size_t done = 0;
  if (aligned) {
    const size_t packs = bytes / 16;
    const uint4* s4 = reinterpret_cast<const uint4*>(src);
    for (size_t i = sh.b * U * kThreads + threadIdx.x; i < packs; i += sh.nb * U * kThreads) {
      uint4 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const size_t j = i + u * kThreads;
        if (j < packs) v[u] = __ldcs(s4 + j);
      }
      for (int m = 0; m < nout; ++m) {
        uint4* d4 = reinterpret_cast<uint4*>(out[m] + outOff);
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const size_t j = i + u * kThreads;
          if (j < packs) __stcs(d4 + j, v[u]);
        }
      }
    }
    done = packs * 16;
  }
  for (size_t i = done + sh.b * kThreads + threadIdx.x; i < bytes; i += sh.nb * kThreads) {
    const char x = src[i];
    for (int m = 0; m < nout; ++m) reinterpret_cast<char*>(out[m] + outOff)[i] = x;
  }
}

// One pair of an all-to-all: toB[i] <- a[i] and toA[i] <- b[i] for i < len,
// by the blocks of `sh`, all threads. a is block j of this rank's input and
// toA the same block of its output; b and toB are block `me` of rank j's. A
// thread reads both elements before it writes either, and no other thread
// touches them, so in place (a == toA, b == toB) this swaps the two blocks.
template <typename T>
__device__ __noinline__ void exchangePair(const T* a, const T* b, T* toA, T* toB, size_t len, Share sh) {
  constexpr int U = kExchangeTile / kThreads / 16;  // packs of each side in flight per thread
  const bool aligned = ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                         reinterpret_cast<uintptr_t>(toA) | reinterpret_cast<uintptr_t>(toB)) & 15) == 0;
  size_t done = 0;
  if (aligned) {
    const size_t packs = len * sizeof(T) / 16;
    const uint4* a4 = reinterpret_cast<const uint4*>(a);
    const uint4* b4 = reinterpret_cast<const uint4*>(b);
    uint4* ta = reinterpret_cast<uint4*>(toA);
    uint4* tb = reinterpret_cast<uint4*>(toB);
    for (size_t i = sh.b * U * kThreads + threadIdx.x; i < packs; i += sh.nb * U * kThreads) {
      uint4 va[U], vb[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const size_t j = i + u * kThreads;
        if (j < packs) {
          va[u] = __ldcg(a4 + j);
          vb[u] = __ldcg(b4 + j);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const size_t j = i + u * kThreads;
        if (j < packs) {
          tb[j] = va[u];
          ta[j] = vb[u];
        }
      }
    }
    done = packs * 16 / sizeof(T);
  }
  for (size_t i = done + sh.b * kThreads + threadIdx.x; i < len; i += sh.nb * kThreads) {
    const T x = a[i], y = b[i];
    toB[i] = x;
    toA[i] = y;
  }
}

// Warp 0 of a block, every lane: until ready(k) holds for every rank k. Lane k
// watches rank k, so the slots are read at once (one memory latency, not one
// per rank, under the load of the other blocks). Checks the ring connectors'
// abort flags (set by the host's abort and by failing peers) and the deadline.
template <typename Ready>
__device__ bool directWait(const DevCollWork& w, Ready ready) {
  const int lane = threadIdx.x;
  const uint64_t deadline = w.ctx.timeoutNs ? globalTimer() + w.ctx.timeoutNs : 0;
  bool here = lane >= w.ctx.nranks || ready(lane);
  for (int iter = 1;; ++iter) {
    const unsigned missing = __ballot_sync(~0u, !here);
    if (!missing) break;
    if (!here) here = ready(lane);
    if (iter % 256) continue;
    int stopped = 0;
    if (lane == 0) {
      const int late = __ffs(missing) - 1;  // named if the wait fails
      const DevFifoCtrl* a = w.sendCh[0].ctrl;
      const DevFifoCtrl* b = w.recvCh[0].ctrl;
      if (a->abort || b->abort) {
        failKernel(w.ctx, w.sendCh, w.recvCh, w.nChannelsConn, kDevPeerFailed, late, 0,
                   a->abort ? a->failedRank : b->failedRank);
        stopped = 1;
      } else if (deadline && globalTimer() > deadline) {
        failKernel(w.ctx, w.sendCh, w.recvCh, w.nChannelsConn, kDevTimeout, late, 0, -1);
        stopped = 1;
      }
    }
    if (__shfl_sync(~0u, stopped, 0)) return false;
  }
  __threadfence();
  return true;
}

// Lane k of warp 0, after the start barrier (ranks in several processes):
// whether every rank reaches rank k's buffers that the others use. Every rank
// computes this from the same slots, so all take the same decision.
template <DevColl C>
__device__ bool directReachable(const DevCollWork& w, int k) {
  if (!w.shared) return true;
  const DevDirectSlot* s = w.slots[k];
  auto ok = [&](int32_t win, uint32_t reg) {
    if (win >= 0) return win < kDevMaxDirectWindows;  // windows are mapped by every rank at once
    if (reg == 0) return false;
    for (int q = 0; q < w.ctx.nranks; ++q)
      if (q != k && w.slots[q]->mapped[k] < reg) return false;
    return true;
  };
  if (directSharesSend(C, k, w.root) && !ok(s->sendWin, s->sendReg)) return false;
  if (directSharesRecv(C, k, w.root) && !ok(s->recvWin, s->recvReg)) return false;
  return true;
}

// Lane k of warp 0, once the ranks agreed on the direct algorithm: rank k's
// buffers as this process reaches them (NULL where no rank reads or writes
// them), or false (and the kernel failed) where one is not mapped here.
template <DevColl C, typename T>
__device__ bool directPeer(const DevCollWork& w, int k, const T** in, T** out) {
  const DevDirectSlot* s = w.slots[k];
  const int me = w.ctx.rank;
  *in = nullptr;
  *out = nullptr;
  if (k == me) {
    *in = static_cast<const T*>(w.send);
    *out = static_cast<T*>(w.recv);
    return true;
  }
  if (!w.shared) {
    *in = static_cast<const T*>(s->send);
    *out = static_cast<T*>(s->recv);
    return true;
  }
  // The window or registration rank k named, as mapped here, plus its offset.
  auto at = [&](int32_t win, uint32_t reg, const volatile void* off) -> char* {
    char* base = nullptr;
    if (win >= 0) base = win < w.winCount && w.winBases ? w.winBases[win * kDevMaxDirect + k] : nullptr;
    else if (reg) base = w.regBases[k * kDevMaxRegistrations + (reg - 1) % kDevMaxRegistrations];
    return base ? base + reinterpret_cast<uintptr_t>(off) : nullptr;
  };
  if (directSharesSend(C, k, w.root) && !(*in = reinterpret_cast<const T*>(at(s->sendWin, s->sendReg, s->send)))) {
    failKernel(w.ctx, w.sendCh, w.recvCh, w.nChannelsConn, kDevAsymmetric, k, 0, me);
    return false;
  }
  if (directSharesRecv(C, k, w.root) && !(*out = reinterpret_cast<T*>(at(s->recvWin, s->recvReg, s->recv)))) {
    failKernel(w.ctx, w.sendCh, w.recvCh, w.nChannelsConn, kDevAsymmetric, k, 1, me);
    return false;
  }
  return true;
}

// Rank `me`'s part of a direct call, by block sh.b of its sh.nb, once every
// rank's buffers (ins, outs) and PreMulSum scalars (ks) are known.
// `count` and `root` as the call has them (per rank for all-gather,
// reduce-scatter, all-to-all, gather and scatter; in bytes for the copies).
template <DevColl C, typename T, DevOp K>
__device__ void directWork(int n, int me, size_t count, int root, const Red<T, K>& r, const T* const* ins,
                           T* const* outs, const T* ks, Share sh) {
  // This rank's part, which its blocks sweep together (Share).
  size_t off = 0, hi = count;
  if (C == DevColl::AllReduce || C == DevColl::Reduce || C == DevColl::Broadcast) channelSlice<T>(count, n, me, &off, &hi);
  const size_t len = hi - off;
  if constexpr (C == DevColl::AllToAll) {
    // Ranks me and j exchange block j of me's buffers with block me of j's:
    // the lower rank moves the first half (16-byte aligned), the other the
    // rest, so each rank reads and writes as many bytes as it owns. Its own
    // block is copied unless in place. A pair may have fewer tiles than the
    // rank has blocks: each pair starts at the block after the last tile of
    // the one before, so that all blocks get work.
    const size_t c = count, half = c / 2 / 16 * 16;  // bytes (the kernel runs on uint8_t)
    int rot = 0;
    auto turn = [&](size_t bytes, size_t tile) {
      const Share t{(sh.b + rot) % sh.nb, sh.nb};
      rot = static_cast<int>((rot + (bytes + tile - 1) / tile) % sh.nb);
      return t;
    };
    for (int j = 0; j < n; ++j) {
      size_t at = 0, end = c;
      if (j != me && me < j) end = half;
      if (j != me && me > j) at = half;
      if (end == at) continue;
      if (j != me)
        exchangePair(ins[me] + j * c + at, ins[j] + me * c + at, outs[me] + j * c + at, outs[j] + me * c + at,
                     end - at, turn(end - at, kExchangeTile));
      else if (ins[me] != outs[me])
        copyN(ins[me], me * c + at, outs + me, 1, me * c + at, end - at, turn(end - at, kCopyTile));
    }
  } else if constexpr (C == DevColl::Gather || C == DevColl::Scatter) {
    // Each rank moves its own block: into the root's output, or out of the
    // root's input (the root's own stays where it is in place).
    const T* from = C == DevColl::Gather ? ins[me] : ins[root] + me * count;
    T* const* to = C == DevColl::Gather ? outs + root : outs + me;
    const size_t toOff = C == DevColl::Gather ? me * count : 0;
    if (len > 0 && from != *to + toOff) copyN(from, 0, to, 1, toOff, len, sh);
  } else if (len > 0) {
    if constexpr (C == DevColl::AllReduce) reduceN(r, ins, ks, n, off, outs, n, off, len, sh);
    else if constexpr (C == DevColl::Reduce) reduceN(r, ins, ks, n, off, outs + root, 1, off, len, sh);
    else if constexpr (C == DevColl::ReduceScatter) reduceN(r, ins, ks, n, me * count + off, outs + me, 1, off, len, sh);
    else if constexpr (C == DevColl::AllGather) copyN(ins[me], off, outs, n, me * count + off, len, sh);
    else copyN(ins[root], off, outs, n, off, len, sh);  // Broadcast
  }
}

// A direct-capable call, by block sh.b of this rank's sh.nb (every rank runs
// as many). Sets *ring when the ranks agreed on the ring instead (ranks in
// several processes whose buffers are not all mapped everywhere): the caller
// then runs it, after this returned. *fail: the call failed.
template <DevColl C, typename T, DevOp K>
__device__ void directColl(const DevCollWork& w, const Red<T, K>& r, int* fail, int* ring, Share sh) {
  __shared__ const T* ins[kDevMaxDirect];
  __shared__ T* outs[kDevMaxDirect];
  __shared__ T ks[kDevMaxDirect];
  __shared__ uint64_t call, target;
  const int n = w.ctx.nranks, me = w.ctx.rank;
  DevDirectSlot* mine = w.slots[me];
  const uint64_t bytes = w.count * sizeof(T);
  if (threadIdx.x < 32) {
    if (threadIdx.x == 0) {
      call = *static_cast<volatile uint64_t*>(&mine->calls) + 1;
      target = *static_cast<volatile uint64_t*>(&mine->base) + sh.nb;  // every rank runs as many blocks
      if (sh.b == 0) {
        uint64_t bits = 0;
        memcpy(&bits, &r.k, sizeof(T));
        mine->scalar = bits;
        mine->bytes = bytes;
        if (w.shared) {
          // A registration only while it lives: a replayed graph may name one
          // deregistered since, which the peers may have unmapped.
          auto live = [&](uint32_t reg) {
            return reg && w.liveIds[(reg - 1) % kDevMaxRegistrations] == reg - 1 ? reg : 0u;
          };
          const bool sendWin = w.sendWin >= 0, recvWin = w.recvWin >= 0;
          mine->send = reinterpret_cast<const void*>(sendWin ? w.sendOff : w.sendRegOff);
          mine->recv = reinterpret_cast<void*>(recvWin ? w.recvOff : w.recvRegOff);
          mine->sendWin = w.sendWin;
          mine->recvWin = w.recvWin;
          mine->sendReg = sendWin ? 0 : live(w.sendReg);
          mine->recvReg = recvWin ? 0 : live(w.recvReg);
          for (int q = 0; q < n; ++q) mine->mapped[q] = w.mapped[q];
        } else {
          mine->send = w.send;
          mine->recv = w.recv;
        }
        __threadfence();
        mine->published = call;
      }
    }
    __syncwarp();
    const uint64_t c = call;
    bool ok = directWait(w, [&](int k) { return w.slots[k]->published >= c; });
    const int k = threadIdx.x;
    bool reach = true;
    if (ok && k < n) {
      if (w.slots[k]->bytes != bytes) {
        failKernel(w.ctx, w.sendCh, w.recvCh, w.nChannelsConn, kDevCountMismatch, k, 0, me, bytes, w.slots[k]->bytes);
        ok = false;
      } else {
        reach = directReachable<C>(w, k);
      }
    }
    const bool direct = __all_sync(~0u, reach);
    if (ok && k < n && direct) {
      const T* in;
      T* out;
      ok = directPeer<C, T>(w, k, &in, &out);
      ins[k] = in;
      outs[k] = out;
      const uint64_t bits = w.slots[k]->scalar;
      memcpy(&ks[k], &bits, sizeof(T));
    }
    const bool allOk = __all_sync(~0u, ok);
    if (threadIdx.x == 0) {
      if (!allOk) *fail = 1;
      *ring = !direct;
      if (sh.b == 0 && w.shared && allOk) ++(direct ? mine->directRuns : mine->ringRuns);  // for the report at destroy
    }
  }
  __syncthreads();
  if (*fail) return;

  if (!*ring) directWork<C, T, K>(n, me, w.count, w.root, r, ins, outs, ks, sh);

  // Every block counts itself done in its rank's slot; block 0 of each rank
  // waits until every rank's count reached this call's end (every rank runs
  // as many blocks), so that when the kernel ends, this rank's output is
  // complete and no peer reads its buffers (or its slot, for this call) any
  // more. On the ring this comes before the ring's work: it only keeps a rank
  // from publishing its next call while a peer still reads this one.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();  // this block's writes before the count
    atomicAdd(&mine->finished, 1ull);
  }
  if (sh.b == 0 && threadIdx.x < 32) {
    const uint64_t t = target;
    const bool ok = directWait(w, [&](int k) {
      return *reinterpret_cast<volatile unsigned long long*>(&w.slots[k]->finished) >= t;
    });
    if (threadIdx.x == 0) {
      if (ok) {
        mine->base = t;
        mine->calls = call;
      } else {
        *fail = 1;
      }
    }
  }
}

}  // namespace
}  // namespace accl
