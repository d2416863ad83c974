// Direct collectives of the CUDA executor: the ranks of one process on one GPU
// read each other's inputs and write each other's outputs, so every byte is
// read and written once, as the HBM bound counts it (the ring moves it through
// connector slots: twice the traffic).
//
// A call: block 0 publishes this rank's buffers in its slot of the shared table
// (dev_types.h DevDirectSlot) and every block waits until every rank published
// the same call; then each rank reduces the part it owns, over all inputs,
// into all outputs; the last block of each rank to finish marks the call done
// and waits until every rank did, so that when a rank's kernel ends, its output
// is complete and no peer reads its buffers any more. In place is safe: a part
// of every buffer is read and written by its owner alone, reads first.
#pragma once

#include "device/dev_prims.cuh"

namespace accl {
namespace {

// out[j][outOff + i] <- fin(in[0] combined with in[1..nin-1], at inOff + i)
// for i < len and every j < nout, by all threads of the block. PreMulSum
// scales each input by its own rank's scalar (ks[k]), as each rank's op says.
// The tables are in shared memory; inputs are read through L2.
template <typename T, DevOp K>
__device__ __noinline__ void reduceN(Red<T, K> r, const T* const* in, const T* ks, int nin, size_t inOff,
                                     T* const* out, int nout, size_t outOff, size_t len) {
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
    for (size_t i = threadIdx.x; i < packs; i += U * kThreads) {
      T acc[U][E];
      uint4 v[U];
      for (int k = 0; k < nin; ++k) {
        const uint4* src = reinterpret_cast<const uint4*>(in[k] + inOff);
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const size_t j = i + u * kThreads;
          if (j < packs) v[u] = __ldcg(src + j);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          T e[E];
          memcpy(e, &v[u], 16);
#pragma unroll
          for (int x = 0; x < E; ++x) acc[u][x] = fold(acc[u][x], e[x], k);
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
  for (size_t i = done + threadIdx.x; i < len; i += kThreads) {
    T acc = fold(T{}, loadCg(in[0] + inOff + i), 0);
    for (int k = 1; k < nin; ++k) acc = fold(acc, loadCg(in[k] + inOff + i), k);
    const T x = r.fin(acc);
    for (int m = 0; m < nout; ++m) out[m][outOff + i] = x;
  }
}

// Thread 0: until every rank's slot shows `call` published (or done), checking
// the ring connectors' abort flags (set by the host's abort) and the deadline.
__device__ bool directWait(const DevCollWork& w, uint64_t call, bool forDone, uint64_t deadline) {
  DevDirectSlot* tab = w.direct;
  for (int k = 0; k < w.ctx.nranks; ++k) {
    for (int iter = 1;; ++iter) {
      if ((forDone ? tab[k].done : tab[k].published) >= call) break;
      if (iter % 256) continue;
      const DevFifoCtrl* a = w.sendCh[0].ctrl;
      const DevFifoCtrl* b = w.recvCh[0].ctrl;
      if (a->abort || b->abort) {
        int failed = a->abort ? a->failedRank : b->failedRank;
        failKernel(w.ctx, w.sendCh, w.recvCh, w.nChannelsConn, kDevPeerFailed, k, 0, failed);
        return false;
      }
      if (deadline && globalTimer() > deadline) {
        failKernel(w.ctx, w.sendCh, w.recvCh, w.nChannelsConn, kDevTimeout, k, 0, -1);
        return false;
      }
    }
  }
  __threadfence();
  return true;
}

template <DevColl C, typename T, DevOp K>
__device__ void directColl(const DevCollWork& w, const Red<T, K>& r, int* fail) {
  __shared__ const T* ins[kDevMaxDirect];
  __shared__ T* outs[kDevMaxDirect];
  __shared__ T ks[kDevMaxDirect];
  __shared__ uint64_t call;
  const int n = w.ctx.nranks, me = w.ctx.rank;
  DevDirectSlot* tab = w.direct;
  if (threadIdx.x == 0) {
    const uint64_t deadline = w.ctx.timeoutNs ? globalTimer() + w.ctx.timeoutNs : 0;
    call = *static_cast<volatile uint64_t*>(&tab[me].calls) + 1;
    if (blockIdx.x == 0) {
      uint64_t bits = 0;
      memcpy(&bits, &r.k, sizeof(T));
      tab[me].scalar = bits;
      tab[me].send = w.send;
      tab[me].recv = w.recv;
      __threadfence();
      tab[me].published = call;
    }
    if (directWait(w, call, false, deadline)) {
      for (int k = 0; k < n; ++k) {
        ins[k] = static_cast<const T*>(tab[k].send);
        outs[k] = static_cast<T*>(tab[k].recv);
        const uint64_t bits = tab[k].scalar;
        memcpy(&ks[k], &bits, sizeof(T));
      }
    } else {
      *fail = 1;
    }
  }
  __syncthreads();
  if (*fail) return;

  // This rank's part, then this block's share of it.
  size_t lo = 0, hi = w.count;
  if (C == DevColl::AllReduce || C == DevColl::Reduce || C == DevColl::Broadcast) channelSlice<T>(w.count, n, me, &lo, &hi);
  size_t blo, bhi;
  channelSlice<T>(hi - lo, gridDim.x, blockIdx.x, &blo, &bhi);
  const size_t off = lo + blo, len = bhi - blo;
  if (len > 0) {
    if constexpr (C == DevColl::AllReduce) reduceN(r, ins, ks, n, off, outs, n, off, len);
    else if constexpr (C == DevColl::Reduce) reduceN(r, ins, ks, n, off, outs + w.root, 1, off, len);
    else if constexpr (C == DevColl::ReduceScatter) reduceN(r, ins, ks, n, me * w.count + off, outs + me, 1, off, len);
    else if constexpr (C == DevColl::AllGather) reduceN(r, ins + me, ks + me, 1, off, outs, n, me * w.count + off, len);
    else reduceN(r, ins + w.root, ks + w.root, 1, off, outs, n, off, len);  // Broadcast
  }

  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();  // this block's writes before the count
    if (atomicAdd(&tab[me].arrived, 1u) == gridDim.x - 1) {
      tab[me].arrived = 0;
      tab[me].calls = call;
      __threadfence();
      tab[me].done = call;
      const uint64_t deadline = w.ctx.timeoutNs ? globalTimer() + w.ctx.timeoutNs : 0;
      if (!directWait(w, call, true, deadline)) *fail = 1;
    }
  }
}

}  // namespace
}  // namespace accl
