// The collectives of the CUDA executor: the host mode's ring algorithms
// (coll/ring_*.cc) over the primitives of device/dev_prims.cuh, one block
// per channel. collKernel<C, T, K> holds one collective only, so that a
// translation unit compiles just the (collective, type, op) triples it launches.
#pragma once

#include "device/dev_direct.cuh"
#include "device/dev_prims.cuh"

namespace accl {
namespace {

template <typename T, DevOp K>
__device__ void ringAllReduce(RingPrims<T, K>& p, const T* src, T* dst, size_t lo, size_t hi, int n, int pos,
                              size_t chunkElems) {
  const size_t align = 64 / sizeof(T) > 0 ? 64 / sizeof(T) : 1;
  const size_t loopElems = chunkElems * n;
  for (size_t base = lo; base < hi; base += loopElems) {
    const size_t rem = minz(loopElems, hi - base);
    size_t per = (rem + n - 1) / n;
    per = minz(chunkElems, (per + align - 1) / align * align);
    auto off = [&](int c) { return base + minz(rem, c * per); };
    auto len = [&](int c) { return minz(rem, (c + 1) * per) - minz(rem, c * per); };
    auto block = [&](int k) { return (pos + n - k) % n; };
    int c = block(1);
    if (!p.sendLocal(src + off(c), len(c), true)) return;
    for (int k = 2; k < n; ++k) {
      c = block(k);
      if (!p.recvReduceSend(src + off(c), nullptr, len(c), false)) return;
    }
    c = block(0);
    if (!p.recvReduceSend(src + off(c), dst + off(c), len(c), true)) return;
    for (int k = 1; k < n - 1; ++k) {
      c = block(k);
      if (!p.recvCopySend(dst + off(c), len(c))) return;
    }
    c = block(n - 1);
    if (!p.recvOut(dst + off(c), len(c))) return;
  }
}

// Positions relative to the root: 0 sends, n-1 only receives.
template <typename T, DevOp K>
__device__ void ringBroadcast(RingPrims<T, K>& p, const T* src, T* dst, size_t lo, size_t hi, int rel, int n,
                              size_t chunkElems) {
  if (rel == 0 && src != dst) copyIn(p.r, src + lo, dst + lo, nullptr, hi - lo);
  for (size_t off = lo; off < hi; off += chunkElems) {
    size_t len = minz(chunkElems, hi - off);
    bool ok = rel == 0 ? p.sendLocal(src + off, len, false)
                       : rel == n - 1 ? p.recvOut(dst + off, len) : p.recvCopySend(dst + off, len);
    if (!ok) return;
  }
}

// 0: the rank after the root starts; n-1: the root.
template <typename T, DevOp K>
__device__ void ringReduce(RingPrims<T, K>& p, const T* src, T* dst, size_t lo, size_t hi, int rel, int n,
                           size_t chunkElems) {
  for (size_t off = lo; off < hi; off += chunkElems) {
    size_t len = minz(chunkElems, hi - off);
    bool ok = rel == 0 ? p.sendLocal(src + off, len, true)
                       : rel == n - 1 ? p.recvReduceCopy(src + off, dst + off, len)
                                      : p.recvReduceSend(src + off, nullptr, len, false);
    if (!ok) return;
  }
}

template <typename T, DevOp K>
__device__ void ringAllGather(RingPrims<T, K>& p, const T* src, T* dst, size_t count, size_t lo, size_t hi,
                              int pos, int n, size_t chunkElems) {
  T* mine = dst + static_cast<size_t>(pos) * count;
  if (src != mine) copyIn(p.r, src + lo, mine + lo, nullptr, hi - lo);
  auto blockOf = [&](int k) { return static_cast<size_t>((pos + n - k) % n); };
  for (size_t off = lo; off < hi; off += chunkElems) {
    size_t len = minz(chunkElems, hi - off);
    if (!p.sendLocal(src + off, len, false)) return;
    for (int k = 1; k < n - 1; ++k)
      if (!p.recvCopySend(dst + blockOf(k) * count + off, len)) return;
    if (!p.recvOut(dst + blockOf(n - 1) * count + off, len)) return;
  }
}

template <typename T, DevOp K>
__device__ void ringReduceScatter(RingPrims<T, K>& p, const T* src, T* dst, size_t count, size_t lo, size_t hi,
                                  int pos, int n, size_t chunkElems) {
  auto input = [&](int k) { return src + static_cast<size_t>((pos + n - k) % n) * count; };
  for (size_t off = lo; off < hi; off += chunkElems) {
    size_t len = minz(chunkElems, hi - off);
    if (!p.sendLocal(input(1) + off, len, true)) return;
    for (int k = 2; k < n; ++k)
      if (!p.recvReduceSend(input(k) + off, nullptr, len, false)) return;
    if (!p.recvReduceCopy(input(0) + off, dst + off, len)) return;
  }
}

// A rank's PreMulSum scalar: in device memory (ncclScalarDevice) or given.
template <typename T>
__device__ T scalarOf(const void* ptr, double f, int64_t i) {
  return ptr ? *static_cast<const T*>(ptr) : ScalarFrom<T>::get(f, i);
}

// The op with this rank's scalar (PreMulSum, SumPostDiv).
template <typename T, DevOp K>
__device__ Red<T, K> redOf(const DevCollWork& w) {
  Red<T, K> r;
  r.k = scalarOf<T>(w.scalarPtr, w.scalarF, w.scalarI);
  r.div = w.scalarI;
  return r;
}

template <DevColl C, typename T, DevOp K>
__global__ void __launch_bounds__(kThreads) collKernel(DevCollWork w) {
  __shared__ int fail, ring;
  if (threadIdx.x == 0) fail = ring = 0;
  __syncthreads();
  const Red<T, K> r = redOf<T, K>(w);
  const T* src = static_cast<const T*>(w.send);
  T* dst = static_cast<T*>(w.recv);
  const int n = w.ctx.nranks, pos = w.ctx.rank, c = blockIdx.x;

  if constexpr (C == DevColl::Local) {  // one rank: out = fin(pre(in)) over the whole grid
    // Each block takes a contiguous share; elementwise strides by the block.
    size_t per = (w.count + gridDim.x - 1) / gridDim.x;
    per = (per + 63) / 64 * 64;
    size_t lo = minz(w.count, per * c), hi = minz(w.count, per * (c + 1));
    if (lo < hi) {
      if constexpr (K == DevOp::PreMulSum)
        elementwise<T, K, false, true, true>(r, nullptr, src + lo, dst + lo, nullptr, hi - lo);
      else
        elementwise<T, K, true, false, true>(r, src + lo, nullptr, dst + lo, nullptr, hi - lo);
    }
    return;
  }
  if (w.slots[0]) {
    directColl<C, T, K>(w, r, &fail, &ring, Share{static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x)});
    __syncthreads();
    if (fail || !ring) return;
  }
  if (c < w.nChannels) {  // the ring (a direct-capable launch may have more blocks)
    Block b{&w.ctx, w.sendCh, w.recvCh, w.nChannelsConn, 0, &fail};
    if (threadIdx.x == 0 && w.ctx.timeoutNs) b.deadline = globalTimer() + w.ctx.timeoutNs;
    Conn recv = openConn(w.recvCh + c, (pos + n - 1) % n);
    Conn send = openConn(w.sendCh + c, (pos + 1) % n);
    RingPrims<T, K> p{b, recv, send, r};
    const size_t chunkElems = w.sendCh[c].slotBytes / sizeof(T);
    size_t lo, hi;
    channelSlice<T>(w.count, w.nChannels, c, &lo, &hi);
    if constexpr (C == DevColl::AllReduce) ringAllReduce(p, src, dst, lo, hi, n, pos, chunkElems);
    else if constexpr (C == DevColl::Broadcast)
      ringBroadcast(p, src, dst, lo, hi, (pos - w.root + n) % n, n, chunkElems);
    else if constexpr (C == DevColl::Reduce)
      ringReduce(p, src, dst, lo, hi, (pos - w.root - 1 + 2 * n) % n, n, chunkElems);
    else if constexpr (C == DevColl::AllGather) ringAllGather(p, src, dst, w.count, lo, hi, pos, n, chunkElems);
    else if constexpr (C == DevColl::ReduceScatter) ringReduceScatter(p, src, dst, w.count, lo, hi, pos, n, chunkElems);
    // AllToAll, Gather and Scatter have no ring: they are launched only where
    // they run direct (ranks of one process).
    __syncthreads();
    if (!fail) {
      closeConn(recv);
      closeConn(send);
    }
  }
}

// Every rank's direct call in one launch (DevFusedWork): block b runs rank
// b / blocksPerRank's part. The launch follows every rank's stream and
// precedes each one's next work, so it needs no barrier in the slots (nor
// touches them): every rank's buffers and scalars are in its parameters.
template <DevColl C, typename T, DevOp K>
__global__ void __launch_bounds__(kThreads) fusedKernel(DevFusedWork f) {
  __shared__ const T* ins[kDevMaxDirect];
  __shared__ T* outs[kDevMaxDirect];
  __shared__ T ks[kDevMaxDirect];
  const int n = f.w.ctx.nranks, nb = f.blocksPerRank, me = blockIdx.x / nb;
  if (threadIdx.x < n) {
    const DevRankPart& p = f.parts[threadIdx.x];
    ins[threadIdx.x] = static_cast<const T*>(p.send);
    outs[threadIdx.x] = static_cast<T*>(p.recv);
    ks[threadIdx.x] = scalarOf<T>(p.scalarPtr, p.scalarF, p.scalarI);
  }
  __syncthreads();
  Red<T, K> r;
  r.k = ks[me];
  r.div = f.parts[me].scalarI;
  directWork<C, T, K>(n, me, f.w.count, f.w.root, r, ins, outs, ks, Share{static_cast<int>(blockIdx.x) % nb, nb});
}

// One collective's kernel: a rank's own (DevCollWork), or several ranks' in one (DevFusedWork).
template <DevColl C, typename T, DevOp K>
void launchKernel(const DevCollWork& w, int blocks, cudaStream_t s) {
  collKernel<C, T, K><<<blocks, kThreads, 0, s>>>(w);
}
template <DevColl C, typename T, DevOp K>
void launchKernel(const DevFusedWork& f, int blocks, cudaStream_t s) {
  fusedKernel<C, T, K><<<blocks, kThreads, 0, s>>>(f);
}
inline const DevCollWork& workOf(const DevCollWork& w) { return w; }
inline const DevCollWork& workOf(const DevFusedWork& f) { return f.w; }
inline DevCollWork& workOf(DevCollWork& w) { return w; }
inline DevCollWork& workOf(DevFusedWork& f) { return f.w; }

template <DevColl C, typename T, typename W>
cudaError_t launchColl(const W& w, int blocks, cudaStream_t s) {
  switch (workOf(w).op) {
    case DevOp::Sum: launchKernel<C, T, DevOp::Sum>(w, blocks, s); break;
    case DevOp::Prod: launchKernel<C, T, DevOp::Prod>(w, blocks, s); break;
    case DevOp::Max: launchKernel<C, T, DevOp::Max>(w, blocks, s); break;
    case DevOp::Min: launchKernel<C, T, DevOp::Min>(w, blocks, s); break;
    case DevOp::PreMulSum: launchKernel<C, T, DevOp::PreMulSum>(w, blocks, s); break;
    case DevOp::SumPostDiv:
      if constexpr (std::is_integral<T>::value) {
        launchKernel<C, T, DevOp::SumPostDiv>(w, blocks, s);
        break;
      }
      return cudaErrorInvalidValue;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T, DevOp K>
cudaError_t launchLocal(const DevCollWork& w, int blocks, cudaStream_t s) {
  collKernel<DevColl::Local, T, K><<<blocks, kThreads, 0, s>>>(w);
  return cudaGetLastError();
}

// The collectives that do arithmetic on T (on one rank: PreMulSum's scaling and
// SumPostDiv's division); the copies run on bytes (device/dev_launch.cu).
template <typename T, typename W>
cudaError_t launchReducing(const W& w, int blocks, cudaStream_t s) {
  switch (workOf(w).coll) {
    case DevColl::AllReduce: return launchColl<DevColl::AllReduce, T>(w, blocks, s);
    case DevColl::Reduce: return launchColl<DevColl::Reduce, T>(w, blocks, s);
    case DevColl::ReduceScatter: return launchColl<DevColl::ReduceScatter, T>(w, blocks, s);
    case DevColl::Local:
      if constexpr (std::is_same<W, DevCollWork>::value) {  // one rank: never fused
        if (w.op == DevOp::PreMulSum) return launchLocal<T, DevOp::PreMulSum>(w, blocks, s);
        if constexpr (std::is_integral<T>::value) {
          if (w.op == DevOp::SumPostDiv) return launchLocal<T, DevOp::SumPostDiv>(w, blocks, s);
        }
      }
      return cudaErrorInvalidValue;
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace
}  // namespace accl
