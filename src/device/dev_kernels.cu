// The CUDA executor: the host mode's ring algorithms (coll/ring_*.cc), run by
// one block per channel over device connectors (device/dev_types.h), and the
// point-to-point mover. The element-wise operations are the host executor's
// (device/reduce_ops.h, device/lowp.h), so both executors round the same way.
//
// A step on a connector: the sender waits for a free slot (head), all threads
// write it, fence to system scope, and thread 0 advances tail; the receiver
// waits for tail, reads the slot through L2 (__ldcg: slots are rewritten by
// another kernel, L1 would keep stale lines), then advances head. Thread 0 does
// the waiting; every wait checks the connector's abort flag and the deadline,
// and a failure stops every block of this kernel and aborts this rank's
// connectors, so peers leave too.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "device/dev_launch.h"
#include "device/lowp.h"
#include "device/reduce_ops.h"
#include "nccl.h"

namespace accl {
namespace {

constexpr int kThreads = kDevThreads;

__device__ __forceinline__ uint64_t globalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// ---- loads that bypass L1, for any element size ---------------------------
template <typename T>
__device__ __forceinline__ T loadCg(const T* p) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "element size");
  T v;
  if constexpr (sizeof(T) == 1) {
    unsigned char b = static_cast<unsigned char>(__ldcg(reinterpret_cast<const char*>(p)));
    memcpy(&v, &b, 1);
  } else if constexpr (sizeof(T) == 2) {
    unsigned short b = __ldcg(reinterpret_cast<const unsigned short*>(p));
    memcpy(&v, &b, 2);
  } else if constexpr (sizeof(T) == 4) {
    unsigned int b = __ldcg(reinterpret_cast<const unsigned int*>(p));
    memcpy(&v, &b, 4);
  } else {
    unsigned long long b = __ldcg(reinterpret_cast<const unsigned long long*>(p));
    memcpy(&v, &b, 8);
  }
  return v;
}

// ---- the reduction of one call ---------------------------------------------
template <typename T, DevOp K>
struct Red {
  T k;          // PreMulSum scalar
  int64_t div;  // SumPostDiv divisor
  __device__ T pre(T x) const {
    if constexpr (K == DevOp::PreMulSum) return OpProd<T>()(x, k);
    else return x;
  }
  // peer's partial result with this rank's input (prepared), as host_reduce.cc
  __device__ T comb(T peer, T local) const {
    if constexpr (K == DevOp::Sum || K == DevOp::SumPostDiv) return OpSum<T>()(peer, local);
    else if constexpr (K == DevOp::Prod) return OpProd<T>()(peer, local);
    else if constexpr (K == DevOp::Max) return OpMax<T>()(peer, local);
    else if constexpr (K == DevOp::Min) return OpMin<T>()(peer, local);
    else return OpSum<T>()(peer, pre(local));
  }
  __device__ T fin(T x) const {
    if constexpr (K == DevOp::SumPostDiv) {
      if constexpr (std::is_integral<T>::value) return static_cast<T>(x / static_cast<T>(div));
    }
    return x;
  }
};

template <typename T, int Kind = std::is_integral<T>::value ? 0 : (IsLowp<T>::value ? 2 : 1)>
struct ScalarFrom {
  __device__ static T get(double, int64_t i) { return static_cast<T>(i); }
};
template <typename T>
struct ScalarFrom<T, 1> {
  __device__ static T get(double f, int64_t) { return static_cast<T>(f); }
};
template <typename T>
struct ScalarFrom<T, 2> {
  __device__ static T get(double f, int64_t) { return fromFloat<T>(static_cast<float>(f)); }
};

// d1[i] (and d2[i]) <- fin?(peer ? (local ? comb(peer, local) : peer) : pre(local))
// for i < n, by all threads of the block. Peer data is read through L2.
template <typename T, DevOp K, bool Fin>
__device__ void elementwise(const Red<T, K>& r, const T* peer, const T* local, T* d1, T* d2, size_t n) {
  auto one = [&](T p, T l, bool hasPeer, bool hasLocal) {
    T x = hasPeer ? (hasLocal ? r.comb(p, l) : p) : r.pre(l);
    return Fin ? r.fin(x) : x;
  };
  const bool hasPeer = peer != nullptr, hasLocal = local != nullptr;
  constexpr int E = 16 / sizeof(T);
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  size_t done = 0;
  if ((!hasPeer || aligned(peer)) && (!hasLocal || aligned(local)) && aligned(d1) && (!d2 || aligned(d2))) {
    const size_t packs = n / E;
    const uint4* P = reinterpret_cast<const uint4*>(peer);
    const uint4* L = reinterpret_cast<const uint4*>(local);
    uint4* D1 = reinterpret_cast<uint4*>(d1);
    uint4* D2 = reinterpret_cast<uint4*>(d2);
    constexpr int U = 4;  // packs in flight per thread
    size_t i = threadIdx.x;
    for (; i + (U - 1) * kThreads < packs; i += U * kThreads) {
      uint4 pv[U], lv[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (hasPeer) pv[u] = __ldcg(P + i + u * kThreads);
        if (hasLocal) lv[u] = L[i + u * kThreads];
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        T pe[E], le[E], out[E];
        memcpy(pe, &pv[u], 16);
        memcpy(le, &lv[u], 16);
#pragma unroll
        for (int e = 0; e < E; ++e) out[e] = one(pe[e], le[e], hasPeer, hasLocal);
        uint4 o;
        memcpy(&o, out, 16);
        D1[i + u * kThreads] = o;
        if (D2) D2[i + u * kThreads] = o;
      }
    }
    for (; i < packs; i += kThreads) {
      uint4 pv{}, lv{};
      if (hasPeer) pv = __ldcg(P + i);
      if (hasLocal) lv = L[i];
      T pe[E], le[E], out[E];
      memcpy(pe, &pv, 16);
      memcpy(le, &lv, 16);
#pragma unroll
      for (int e = 0; e < E; ++e) out[e] = one(pe[e], le[e], hasPeer, hasLocal);
      uint4 o;
      memcpy(&o, out, 16);
      D1[i] = o;
      if (D2) D2[i] = o;
    }
    done = packs * E;
  }
  for (size_t i = done + threadIdx.x; i < n; i += kThreads) {
    T p = hasPeer ? loadCg(peer + i) : T{};
    T l = hasLocal ? local[i] : T{};
    T x = one(p, l, hasPeer, hasLocal);
    d1[i] = x;
    if (d2) d2[i] = x;
  }
}

// ---- waiting -----------------------------------------------------------------
struct Fail {
  int flag;  // in shared memory: set by thread 0 when this block must stop
};

// Stops this kernel on this rank: status for the host, abort on every channel
// of this rank's connectors so the peers stop waiting.
__device__ void failKernel(const DevCtx& ctx, DevChan* a, DevChan* b, int nch, int reason, int peer, int isSend,
                           int failedRank, uint32_t expected = 0, uint32_t got = 0) {
  DevStatus* s = ctx.status;
  if (atomicCAS_system(reinterpret_cast<int*>(const_cast<int32_t*>(&s->reason)), 0, reason) == 0) {
    s->peer = peer;
    s->failedRank = failedRank;
    s->isSend = isSend;
    s->expected = expected;
    s->got = got;
  }
  DevChan* both[2] = {a, b};
  for (DevChan* arr : both) {
    if (!arr) continue;
    for (int c = 0; c < nch; ++c) {
      DevFifoCtrl* ctrl = arr[c].ctrl;
      if (ctrl->failedRank < 0) ctrl->failedRank = failedRank >= 0 ? failedRank : ctx.rank;
      ctrl->abort = 1;
    }
  }
  __threadfence_system();
}

// Block-level connector state: thread 0 holds the counters.
struct Conn {
  DevChan* ch;
  uint64_t step;
  uint64_t seen;  // last value read of the peer's counter
  int peer;
};

struct Block {
  const DevCtx* ctx;
  DevChan* abortA;  // this rank's connectors, aborted on failure
  DevChan* abortB;
  int abortN;
  uint64_t deadline;
  int* fail;  // shared

  // Thread 0: spin until ready(), checking abort and the deadline every so often.
  template <typename Ready>
  __device__ bool spin(Conn& c, bool isSend, Ready ready) {
    int iter = 0;
    while (!ready()) {
      if (++iter % 256 == 0) {
        DevFifoCtrl* ctrl = c.ch->ctrl;
        if (ctrl->abort) {
          failKernel(*ctx, abortA, abortB, abortN, kDevPeerFailed, c.peer, isSend, ctrl->failedRank);
          return false;
        }
        if (deadline && globalTimer() > deadline) {
          failKernel(*ctx, abortA, abortB, abortN, kDevTimeout, c.peer, isSend, -1);
          return false;
        }
      }
    }
    return true;
  }
  // All threads: true when the slot of `c` may be written.
  __device__ bool waitSend(Conn& c) {
    if (threadIdx.x == 0 && !*fail) {
      DevFifoCtrl* ctrl = c.ch->ctrl;
      bool ok = spin(c, true, [&] {
        if (c.step - c.seen < kSlots) return true;
        c.seen = ctrl->head;
        return c.step - c.seen < kSlots;
      });
      if (!ok) *fail = 1;
    }
    __syncthreads();
    return !*fail;
  }
  __device__ bool waitRecv(Conn& c, uint32_t bytes) {
    if (threadIdx.x == 0 && !*fail) {
      DevFifoCtrl* ctrl = c.ch->ctrl;
      bool ok = spin(c, false, [&] {
        if (c.seen > c.step) return true;
        c.seen = ctrl->tail;
        return c.seen > c.step;
      });
      if (ok) {
        __threadfence();
        uint32_t got = ctrl->bytes[c.step % kSlots];
        if (got != bytes) {
          failKernel(*ctx, abortA, abortB, abortN, kDevSizeMismatch, c.peer, 0, ctx->rank, bytes, got);
          ok = false;
        }
      }
      if (!ok) *fail = 1;
    }
    __syncthreads();
    return !*fail;
  }
  __device__ char* slot(const Conn& c) const { return c.ch->slots + (c.step % kSlots) * c.ch->slotBytes; }
  // After writing the slot (all threads).
  __device__ void post(Conn& c, uint32_t bytes) {
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) {
      DevFifoCtrl* ctrl = c.ch->ctrl;
      ctrl->bytes[c.step % kSlots] = bytes;
      __threadfence_system();
      ctrl->tail = ++c.step;
    }
    if (threadIdx.x != 0) ++c.step;
  }
  // After reading the slot (all threads).
  __device__ void release(Conn& c) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence_system();
      c.ch->ctrl->head = ++c.step;
    } else {
      ++c.step;
    }
  }
};

// Every thread keeps its own copy of the counters (they move in lockstep); only
// thread 0's `seen` is meaningful.
__device__ Conn openConn(DevChan* ch, int peer) { return Conn{ch, ch ? ch->step : 0, ch ? ch->step : 0, peer}; }
__device__ void closeConn(const Conn& c) {
  if (c.ch && threadIdx.x == 0) c.ch->step = c.step;
}

// ---- ring primitives over one channel ---------------------------------------
template <typename T, DevOp K>
struct RingPrims {
  Block& b;
  Conn& recv;
  Conn& send;
  const Red<T, K>& r;

  __device__ bool sendLocal(const T* local, size_t n, bool prep) {  // next <- pre(local) or local
    if (!b.waitSend(send)) return false;
    T* s = reinterpret_cast<T*>(b.slot(send));
    if (prep) elementwise<T, K, false>(r, nullptr, local, s, nullptr, n);
    else elementwise<T, K, false>(r, local, nullptr, s, nullptr, n);  // a plain copy
    b.post(send, static_cast<uint32_t>(n * sizeof(T)));
    return true;
  }
  __device__ bool recvOut(T* out, size_t n) {  // out <- prev
    if (!b.waitRecv(recv, static_cast<uint32_t>(n * sizeof(T)))) return false;
    elementwise<T, K, false>(r, reinterpret_cast<const T*>(b.slot(recv)), nullptr, out, nullptr, n);
    b.release(recv);
    return true;
  }
  // next <- fin?(comb(prev, local)), and out too when given
  __device__ bool recvReduceSend(const T* local, T* out, size_t n, bool fin) {
    if (!b.waitRecv(recv, static_cast<uint32_t>(n * sizeof(T)))) return false;
    if (!b.waitSend(send)) return false;
    const T* p = reinterpret_cast<const T*>(b.slot(recv));
    T* s = reinterpret_cast<T*>(b.slot(send));
    if (fin) elementwise<T, K, true>(r, p, local, s, out, n);
    else elementwise<T, K, false>(r, p, local, s, out, n);
    b.post(send, static_cast<uint32_t>(n * sizeof(T)));
    b.release(recv);
    return true;
  }
  // out <- fin(comb(prev, local))
  __device__ bool recvReduceCopy(const T* local, T* out, size_t n) {
    if (!b.waitRecv(recv, static_cast<uint32_t>(n * sizeof(T)))) return false;
    elementwise<T, K, true>(r, reinterpret_cast<const T*>(b.slot(recv)), local, out, nullptr, n);
    b.release(recv);
    return true;
  }
  // next <- prev; out <- prev when given
  __device__ bool recvCopySend(T* out, size_t n) {
    if (!b.waitRecv(recv, static_cast<uint32_t>(n * sizeof(T)))) return false;
    if (!b.waitSend(send)) return false;
    elementwise<T, K, false>(r, reinterpret_cast<const T*>(b.slot(recv)), nullptr,
                             reinterpret_cast<T*>(b.slot(send)), out, n);
    b.post(send, static_cast<uint32_t>(n * sizeof(T)));
    b.release(recv);
    return true;
  }
};

__device__ __forceinline__ size_t minz(size_t a, size_t b) { return a < b ? a : b; }

// This channel's share [*lo, *hi) of `count` elements, in whole 64-byte units where possible.
template <typename T>
__device__ void channelSlice(size_t count, int nch, int c, size_t* lo, size_t* hi) {
  const size_t align = 64 / sizeof(T) > 0 ? 64 / sizeof(T) : 1;
  size_t per = (count + nch - 1) / nch;
  per = (per + align - 1) / align * align;
  *lo = minz(count, per * c);
  *hi = minz(count, per * (c + 1));
}

template <typename T, DevOp K>
__device__ void ringAllReduce(Block& b, RingPrims<T, K>& p, const T* src, T* dst, size_t lo, size_t hi, int n,
                              int pos, size_t chunkElems) {
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

template <typename T, DevOp K>
__global__ void __launch_bounds__(kThreads) collKernel(DevCollWork w) {
  __shared__ int fail;
  if (threadIdx.x == 0) fail = 0;
  __syncthreads();
  Red<T, K> r;
  r.k = w.scalarPtr ? *static_cast<const T*>(w.scalarPtr) : ScalarFrom<T>::get(w.scalarF, w.scalarI);
  r.div = w.scalarI;
  const T* src = static_cast<const T*>(w.send);
  T* dst = static_cast<T*>(w.recv);
  const int n = w.ctx.nranks, pos = w.ctx.rank, c = blockIdx.x;

  if (w.coll == DevColl::Local) {  // one rank: out = fin(pre(in)) over the whole grid
    // Each block takes a contiguous share; elementwise strides by the block.
    size_t per = (w.count + gridDim.x - 1) / gridDim.x;
    per = (per + 63) / 64 * 64;
    size_t lo = minz(w.count, per * c), hi = minz(w.count, per * (c + 1));
    if (lo < hi) {
      if (K == DevOp::PreMulSum) elementwise<T, K, true>(r, nullptr, src + lo, dst + lo, nullptr, hi - lo);
      else elementwise<T, K, true>(r, src + lo, nullptr, dst + lo, nullptr, hi - lo);
    }
    return;
  }

  Block b{&w.ctx, w.sendCh, w.recvCh, w.nChannelsConn, 0, &fail};
  if (threadIdx.x == 0 && w.ctx.timeoutNs) b.deadline = globalTimer() + w.ctx.timeoutNs;
  Conn recv = openConn(w.recvCh + c, (pos + n - 1) % n);
  Conn send = openConn(w.sendCh + c, (pos + 1) % n);
  RingPrims<T, K> p{b, recv, send, r};
  const size_t chunkElems = w.sendCh[c].slotBytes / sizeof(T);

  switch (w.coll) {
    case DevColl::AllReduce: {
      size_t lo, hi;
      channelSlice<T>(w.count, w.nChannels, c, &lo, &hi);
      ringAllReduce<T, K>(b, p, src, dst, lo, hi, n, pos, chunkElems);
      break;
    }
    case DevColl::Broadcast: {  // positions relative to the root: 0 sends, n-1 only receives
      size_t lo, hi;
      channelSlice<T>(w.count, w.nChannels, c, &lo, &hi);
      const int rel = (pos - w.root + n) % n;
      if (rel == 0 && src != dst) elementwise<T, K, false>(r, src + lo, nullptr, dst + lo, nullptr, hi - lo);
      for (size_t off = lo; off < hi; off += chunkElems) {
        size_t len = minz(chunkElems, hi - off);
        bool ok = rel == 0 ? p.sendLocal(src + off, len, false)
                           : rel == n - 1 ? p.recvOut(dst + off, len) : p.recvCopySend(dst + off, len);
        if (!ok) break;
      }
      break;
    }
    case DevColl::Reduce: {  // 0: the rank after the root starts; n-1: the root
      size_t lo, hi;
      channelSlice<T>(w.count, w.nChannels, c, &lo, &hi);
      const int rel = (pos - w.root - 1 + 2 * n) % n;
      for (size_t off = lo; off < hi; off += chunkElems) {
        size_t len = minz(chunkElems, hi - off);
        bool ok = rel == 0 ? p.sendLocal(src + off, len, true)
                           : rel == n - 1 ? p.recvReduceCopy(src + off, dst + off, len)
                                          : p.recvReduceSend(src + off, nullptr, len, false);
        if (!ok) break;
      }
      break;
    }
    case DevColl::AllGather: {
      size_t lo, hi;
      channelSlice<T>(w.count, w.nChannels, c, &lo, &hi);
      T* mine = dst + static_cast<size_t>(pos) * w.count;
      if (src != mine) elementwise<T, K, false>(r, src + lo, nullptr, mine + lo, nullptr, hi - lo);
      auto blockOf = [&](int k) { return static_cast<size_t>((pos + n - k) % n); };
      for (size_t off = lo; off < hi; off += chunkElems) {
        size_t len = minz(chunkElems, hi - off);
        if (!p.sendLocal(src + off, len, false)) break;
        bool ok = true;
        for (int k = 1; k < n - 1 && ok; ++k) ok = p.recvCopySend(dst + blockOf(k) * w.count + off, len);
        if (!ok || !p.recvOut(dst + blockOf(n - 1) * w.count + off, len)) break;
      }
      break;
    }
    case DevColl::ReduceScatter: {
      size_t lo, hi;
      channelSlice<T>(w.count, w.nChannels, c, &lo, &hi);
      auto input = [&](int k) { return src + static_cast<size_t>((pos + n - k) % n) * w.count; };
      for (size_t off = lo; off < hi; off += chunkElems) {
        size_t len = minz(chunkElems, hi - off);
        if (!p.sendLocal(input(1) + off, len, true)) break;
        bool ok = true;
        for (int k = 2; k < n && ok; ++k) ok = p.recvReduceSend(input(k) + off, nullptr, len, false);
        if (!ok || !p.recvReduceCopy(input(0) + off, dst + off, len)) break;
      }
      break;
    }
    default: break;
  }
  __syncthreads();
  if (!fail) {
    closeConn(recv);
    closeConn(send);
  }
}

// ---- point-to-point ----------------------------------------------------------
__global__ void __launch_bounds__(kThreads, 2) p2pKernel(DevP2pWork w) {
  __shared__ int fail;
  if (threadIdx.x == 0) fail = 0;
  __syncthreads();
  const int entry = blockIdx.x / w.chansPerEntry, c = blockIdx.x % w.chansPerEntry;
  Red<uint8_t, DevOp::Sum> r{0, 1};
  for (int i = 0; i < w.nOps && !fail; ++i) {
    const DevP2pOp& op = w.ops[i];
    if (op.entry != entry || c >= op.nChannels) continue;
    size_t lo, hi;
    channelSlice<uint8_t>(op.bytes, op.nChannels, c, &lo, &hi);
    if (!op.ch) {  // a send to self, matched with its receive
      elementwise<uint8_t, DevOp::Sum, false>(r, reinterpret_cast<const uint8_t*>(op.src) + lo, nullptr,
                                              reinterpret_cast<uint8_t*>(op.buf) + lo, nullptr, hi - lo);
      continue;
    }
    DevChan* ch = op.ch + c;
    Block b{&w.ctx, op.ch, nullptr, w.nChannelsConn, 0, &fail};
    if (threadIdx.x == 0 && w.ctx.timeoutNs) b.deadline = globalTimer() + w.ctx.timeoutNs;
    Conn conn = openConn(ch, op.peer);
    const size_t chunk = ch->slotBytes;
    uint8_t* buf = reinterpret_cast<uint8_t*>(op.buf);
    for (size_t off = lo; off < hi; off += chunk) {
      size_t len = minz(chunk, hi - off);
      if (op.isSend) {
        if (!b.waitSend(conn)) break;
        elementwise<uint8_t, DevOp::Sum, false>(r, buf + off, nullptr, reinterpret_cast<uint8_t*>(b.slot(conn)),
                                                nullptr, len);
        b.post(conn, static_cast<uint32_t>(len));
      } else {
        if (!b.waitRecv(conn, static_cast<uint32_t>(len))) break;
        elementwise<uint8_t, DevOp::Sum, false>(r, reinterpret_cast<const uint8_t*>(b.slot(conn)), nullptr,
                                                buf + off, nullptr, len);
        b.release(conn);
      }
    }
    __syncthreads();
    if (!fail) closeConn(conn);
  }
}

template <typename T>
cudaError_t launchTyped(const DevCollWork& w, int blocks, cudaStream_t s) {
  switch (w.op) {
    case DevOp::Sum: collKernel<T, DevOp::Sum><<<blocks, kThreads, 0, s>>>(w); break;
    case DevOp::Prod: collKernel<T, DevOp::Prod><<<blocks, kThreads, 0, s>>>(w); break;
    case DevOp::Max: collKernel<T, DevOp::Max><<<blocks, kThreads, 0, s>>>(w); break;
    case DevOp::Min: collKernel<T, DevOp::Min><<<blocks, kThreads, 0, s>>>(w); break;
    case DevOp::PreMulSum: collKernel<T, DevOp::PreMulSum><<<blocks, kThreads, 0, s>>>(w); break;
    case DevOp::SumPostDiv:
      if constexpr (std::is_integral<T>::value) {
        collKernel<T, DevOp::SumPostDiv><<<blocks, kThreads, 0, s>>>(w);
        break;
      }
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t devLaunchColl(const DevCollWork& w, int blocks, cudaStream_t stream) {
  // Copies (broadcast, allgather, a 1-rank op without arithmetic) move bytes.
  const bool copyOnly = w.coll == DevColl::Broadcast || w.coll == DevColl::AllGather ||
                        (w.coll == DevColl::Local && (w.op == DevOp::Sum || w.op == DevOp::Prod ||
                                                      w.op == DevOp::Max || w.op == DevOp::Min));
  if (copyOnly) {
    DevCollWork b = w;
    b.count = w.count * devTypeSize(w.type);
    b.op = DevOp::Sum;
    return launchTyped<uint8_t>(b, blocks, stream);
  }
#define ACCL_TYPE_CASE(typeEnum, ctype) \
  case typeEnum: return launchTyped<ctype>(w, blocks, stream);
  switch (static_cast<ncclDataType_t>(w.type)) {
    ACCL_NATIVE_TYPES(ACCL_TYPE_CASE)
    ACCL_LOWP_TYPES(ACCL_TYPE_CASE)
    default: return cudaErrorInvalidValue;
  }
#undef ACCL_TYPE_CASE
}

cudaError_t devLaunchP2p(const DevP2pWork& w, cudaStream_t stream) {
  p2pKernel<<<w.nEntries * w.chansPerEntry, kThreads, 0, stream>>>(w);
  return cudaGetLastError();
}

size_t devTypeSize(int type) {
  switch (static_cast<ncclDataType_t>(type)) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

}  // namespace accl
