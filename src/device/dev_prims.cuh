// The CUDA executor's building blocks: element-wise kernels' inner loop, waits
// on device connectors, and the ring primitives every collective is made of
// (device/dev_colls.cuh puts them together). The element-wise operations are
// the host executor's (device/reduce_ops.h, device/lowp.h), so both executors
// round the same way.
//
// A step on a connector: the sender waits for a free slot (head), all threads
// write it, and after a barrier thread 0 fences and advances tail; the
// receiver waits for tail, reads the slot through L2 (__ldcg: slots are
// rewritten by another kernel, L1 would keep stale lines), then advances head.
// Tail is in the receiver's GPU memory, head in the shared control block
// (dev_types.h); the fence is of GPU scope between ranks of one GPU (one L2,
// whichever process), of system scope between GPUs. Thread 0 does the
// waiting; every wait checks the connector's abort flag and the deadline,
// and a failure stops every block of this kernel and aborts this rank's
// connectors, so peers leave too.
//
// Compile time matters here (CI builds this on 2 cores): the element-wise loop
// is one out-of-line function per (type, op, operand shape), not inlined into
// every call site, and the kernels are spread over one translation unit per
// datatype.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "device/dev_launch.h"
#include "device/lowp.h"
#include "device/reduce_ops.h"
#include "nccl.h"

namespace accl {
namespace {  // each translation unit has its own kernels

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

// d1[i] (and d2[i] when given) <- fin?(peer ? (local ? comb(peer, local) : peer)
// : pre(local)) for i < n, by all threads of the block. Peer data is read
// through L2. Which operands exist is a template parameter, so each loop body
// is branch-free; out of line, so each shape is compiled once per (T, K).
template <typename T, DevOp K, bool HasPeer, bool HasLocal, bool Fin>
__device__ __noinline__ void elementwise(Red<T, K> r, const T* peer, const T* local, T* d1, T* d2, size_t n) {
  static_assert(HasPeer || HasLocal, "an input");
  auto one = [&](T p, T l) {
    T x = HasPeer ? (HasLocal ? r.comb(p, l) : p) : r.pre(l);
    return Fin ? r.fin(x) : x;
  };
  constexpr int E = 16 / sizeof(T);
  // Packs in flight per thread; the software-converted low-precision types are
  // compute-bound already and would only grow the code.
  constexpr int U = IsLowp<T>::value ? 1 : 4;
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  size_t done = 0;
  if ((!HasPeer || aligned(peer)) && (!HasLocal || aligned(local)) && aligned(d1) && (!d2 || aligned(d2))) {
    const size_t packs = n / E;
    const uint4* P = reinterpret_cast<const uint4*>(peer);
    const uint4* L = reinterpret_cast<const uint4*>(local);
    uint4* D1 = reinterpret_cast<uint4*>(d1);
    uint4* D2 = reinterpret_cast<uint4*>(d2);
    for (size_t i = threadIdx.x; i < packs; i += U * kThreads) {
      uint4 pv[U], lv[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const size_t j = i + u * kThreads;
        if (j < packs) {
          if (HasPeer) pv[u] = __ldcg(P + j);
          if (HasLocal) lv[u] = L[j];
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const size_t j = i + u * kThreads;
        if (j >= packs) break;
        T pe[E], le[E], out[E];
        if (HasPeer) memcpy(pe, &pv[u], 16);
        if (HasLocal) memcpy(le, &lv[u], 16);
#pragma unroll
        for (int e = 0; e < E; ++e) out[e] = one(pe[e], le[e]);
        uint4 o;
        memcpy(&o, out, 16);
        D1[j] = o;
        if (D2) D2[j] = o;
      }
    }
    done = packs * E;
  }
  for (size_t i = done + threadIdx.x; i < n; i += kThreads) {
    T p = HasPeer ? loadCg(peer + i) : T{};
    T l = HasLocal ? local[i] : T{};
    T x = one(p, l);
    d1[i] = x;
    if (d2) d2[i] = x;
  }
}

// The shapes the primitives use. T and K come from the reduction alone (NoDeduce
// keeps the pointers out of deduction, so nullptr may be passed).
template <typename T>
struct NoDeduce {
  using type = T;
};
template <typename T, DevOp K>
__device__ void copyIn(const Red<T, K>& r, const typename NoDeduce<T>::type* in, typename NoDeduce<T>::type* d1,
                       typename NoDeduce<T>::type* d2, size_t n) {  // d <- in
  elementwise<T, K, true, false, false>(r, in, nullptr, d1, d2, n);
}
template <typename T, DevOp K>
__device__ void prepIn(const Red<T, K>& r, const T* local, T* d, size_t n) {  // d <- pre(local)
  elementwise<T, K, false, true, false>(r, nullptr, local, d, nullptr, n);
}
template <typename T, DevOp K, bool Fin>
__device__ void combine(const Red<T, K>& r, const T* peer, const T* local, T* d1,
                        typename NoDeduce<T>::type* d2, size_t n) {
  elementwise<T, K, true, true, Fin>(r, peer, local, d1, d2, n);
}

// ---- waiting -----------------------------------------------------------------
// Stops this kernel on this rank: status for the host, abort on every channel
// of this rank's connectors so the peers stop waiting.
__device__ void failKernel(const DevCtx& ctx, DevChan* a, DevChan* b, int nch, int reason, int peer, int isSend,
                           int failedRank, uint64_t expected = 0, uint64_t got = 0) {
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
      // The first cause stays against other kernels' aborts (the host's
      // fifoAbort is atomic with this only where the platform supports
      // host-native atomics on mapped memory).
      atomicCAS_system(reinterpret_cast<int*>(const_cast<int32_t*>(&ctrl->failedRank)), -1,
                       failedRank >= 0 ? failedRank : ctx.rank);
      ctrl->abort = 1;
    }
  }
  __threadfence_system();
}

// Orders this thread's earlier accesses (and, after a barrier, the block's: a
// fence is cumulative) before its next write, for the peer of `ch`.
__device__ __forceinline__ void fenceFor(const DevChan* ch) {
  if (ch->crossGpu) __threadfence_system();
  else __threadfence();
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
        // A network connector's proxy saw its peer leave or die (CUDA IPC
        // connectors never set it): what this wait needs cannot come.
        if (ctrl->peerGone) {
          failKernel(*ctx, abortA, abortB, abortN, kDevPeerFailed, c.peer, isSend, c.peer);
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
  __device__ bool waitRecv(Conn& c, uint32_t bytes, uint64_t expectReport = 0) {
    if (threadIdx.x == 0 && !*fail) {
      DevCounters* cnt = c.ch->cnt;
      bool ok = spin(c, false, [&] {
        if (c.seen > c.step) return true;
        c.seen = cnt->tail;
        return c.seen > c.step;
      });
      if (ok) {
        fenceFor(c.ch);
        uint32_t got = cnt->bytes[c.step % kSlots];
        if (got != bytes) {
          // A direct send's slot holds its slice's size; a direct receive
          // names its own slice's.
          const uint64_t sent = got == kDevP2pDirectMark
                                    ? reinterpret_cast<const volatile DevP2pDirect*>(slot(c))->bytes : got;
          failKernel(*ctx, abortA, abortB, abortN, kDevSizeMismatch, c.peer, 0, ctx->rank,
                     expectReport ? expectReport : bytes, sent);
          ok = false;
        }
      }
      if (!ok) *fail = 1;
    }
    __syncthreads();
    return !*fail;
  }
  __device__ char* slot(const Conn& c) const { return c.ch->slots + (c.step % kSlots) * c.ch->slotBytes; }
  // After writing the slot (all threads). The barrier orders every thread's
  // writes before thread 0's fence, which makes them visible before tail.
  __device__ void post(Conn& c, uint32_t bytes) {
    __syncthreads();
    if (threadIdx.x == 0) {
      DevCounters* cnt = c.ch->cnt;
      cnt->bytes[c.step % kSlots] = bytes;
      fenceFor(c.ch);
      cnt->tail = ++c.step;
    }
    if (threadIdx.x != 0) ++c.step;
  }
  // After reading the slot (all threads).
  __device__ void release(Conn& c) {
    __syncthreads();
    if (threadIdx.x == 0) {
      fenceFor(c.ch);
      c.ch->ctrl->head = ++c.step;
    } else {
      ++c.step;
    }
  }
};

// Every thread keeps its own copy of the counters (they move in lockstep); only
// thread 0's `seen` is meaningful. A sender starts from the head it last read
// (slots an earlier kernel posted may still be unread); a receiver's `seen`
// (the tail) is read at its first wait.
__device__ Conn openConn(DevChan* ch, int peer) { return Conn{ch, ch ? ch->step : 0, ch ? ch->seen : 0, peer}; }
__device__ void closeConn(const Conn& c) {
  if (c.ch && threadIdx.x == 0) {
    c.ch->step = c.step;
    c.ch->seen = c.seen;
  }
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
    if (prep) prepIn(r, local, s, n);
    else copyIn(r, local, s, nullptr, n);
    b.post(send, static_cast<uint32_t>(n * sizeof(T)));
    return true;
  }
  __device__ bool recvOut(T* out, size_t n) {  // out <- prev
    if (!b.waitRecv(recv, static_cast<uint32_t>(n * sizeof(T)))) return false;
    copyIn(r, reinterpret_cast<const T*>(b.slot(recv)), out, nullptr, n);
    b.release(recv);
    return true;
  }
  // next <- fin?(comb(prev, local)), and out too when given
  __device__ bool recvReduceSend(const T* local, T* out, size_t n, bool fin) {
    if (!b.waitRecv(recv, static_cast<uint32_t>(n * sizeof(T)))) return false;
    if (!b.waitSend(send)) return false;
    const T* p = reinterpret_cast<const T*>(b.slot(recv));
    T* s = reinterpret_cast<T*>(b.slot(send));
    if (fin) combine<T, K, true>(r, p, local, s, out, n);
    else combine<T, K, false>(r, p, local, s, out, n);
    b.post(send, static_cast<uint32_t>(n * sizeof(T)));
    b.release(recv);
    return true;
  }
  // out <- fin(comb(prev, local))
  __device__ bool recvReduceCopy(const T* local, T* out, size_t n) {
    if (!b.waitRecv(recv, static_cast<uint32_t>(n * sizeof(T)))) return false;
    combine<T, K, true>(r, reinterpret_cast<const T*>(b.slot(recv)), local, out, nullptr, n);
    b.release(recv);
    return true;
  }
  // next <- prev; out <- prev when given
  __device__ bool recvCopySend(T* out, size_t n) {
    if (!b.waitRecv(recv, static_cast<uint32_t>(n * sizeof(T)))) return false;
    if (!b.waitSend(send)) return false;
    copyIn(r, reinterpret_cast<const T*>(b.slot(recv)), reinterpret_cast<T*>(b.slot(send)), out, n);
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


}  // namespace
}  // namespace accl
