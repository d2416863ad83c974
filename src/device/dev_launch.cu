// The CUDA executor's entry points: collectives that only move bytes, the
// point-to-point kernel, and the dispatch of the reducing collectives to their
// per-datatype translation units.
#include "device/dev_colls.cuh"
#include "device/dev_reducing.h"

namespace accl {
namespace {

// dst[i] <- src[i] for i < len, by all threads of the block, four 16-byte
// packs in flight per thread. Inlined, and four, not eight: the kernel has 64
// registers (two blocks per multiprocessor), and copyN out of line spilled
// its packs to local memory (ptxas -v). A 64 MiB sendrecv of 2 ranks on the
// H200 took 129 us that way, 121 inlined with eight packs, 93 with four
// (89 with eight and one block per multiprocessor, which halves residency).
__device__ __forceinline__ void copyBytes(const uint8_t* src, uint8_t* dst, size_t len) {
  constexpr int U = 4;
  size_t done = 0;
  if (((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15) == 0) {
    const size_t packs = len / 16;
    const uint4* s4 = reinterpret_cast<const uint4*>(src);
    uint4* d4 = reinterpret_cast<uint4*>(dst);
    for (size_t i = threadIdx.x; i < packs; i += U * kThreads) {
      uint4 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (i + u * kThreads < packs) v[u] = __ldcg(s4 + i + u * kThreads);
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (i + u * kThreads < packs) d4[i + u * kThreads] = v[u];
    }
    done = packs * 16;
  }
  for (size_t i = done + threadIdx.x; i < len; i += kThreads) dst[i] = src[i];
}

// The slot of a connector's step `step` as the direct handshake reads it.
__device__ volatile DevP2pDirect* directSlot(const DevChan* ch, uint64_t step) {
  return reinterpret_cast<volatile DevP2pDirect*>(ch->slots + (step % kSlots) * ch->slotBytes);
}

// Where the receiver's part [0, mid) of a direct slice of `len` bytes ends:
// each end's block copies `extra` bytes besides this operation and runs
// `rounds` of its slices, so it carries extra + rounds * (its part of a
// slice); the split makes the two loads equal where it can. Equal loads
// split in half.
__device__ size_t directSplit(size_t len, uint64_t roundsS, uint64_t extraS, uint64_t roundsR, uint64_t extraR) {
  const double L = static_cast<double>(len);
  double f = (static_cast<double>(extraS) - static_cast<double>(extraR) + static_cast<double>(roundsS) * L) /
             (static_cast<double>(roundsR + roundsS) * L);
  f = fmin(1.0, fmax(0.0, f));
  return minz(len, static_cast<size_t>(f * L) / 64 * 64);
}

// Every thread copies its block's share of the group's copies to self.
__device__ void selfCopies(const DevP2pWork& w) {
  for (int i = 0; i < w.nOps; ++i) {
    const DevP2pOp& op = w.ops[i];
    if (op.ch) continue;
    size_t lo, hi;
    channelSlice<uint8_t>(op.bytes, gridDim.x, blockIdx.x, &lo, &hi);
    if (hi > lo)
      copyBytes(reinterpret_cast<const uint8_t*>(op.src) + lo, reinterpret_cast<uint8_t*>(op.buf) + lo, hi - lo);
  }
}

// This block's slices of one direct send or receive (DevP2pDirect), in its
// three passes; the block's share of the self copies runs between the
// second and the third when `withSelf` (and counts in the split only then).
// All threads.
__device__ void p2pDirectOp(const DevP2pWork& w, const DevP2pOp& op, int first, int* fail, bool withSelf) {
  __shared__ const char* src;
  __shared__ char* dst;
  __shared__ size_t mid;
  Block b{&w.ctx, op.ch, nullptr, w.nChannelsConn, 0, fail};
  if (threadIdx.x == 0 && w.ctx.timeoutNs) b.deadline = globalTimer() + w.ctx.timeoutNs;
  const int step = w.chansPerEntry;
  const uint64_t rounds = (op.nChannels - first + step - 1) / step;
  const uint64_t extra = withSelf ? w.selfBytes / gridDim.x : 0;
  auto slice = [&](int c, size_t* lo, size_t* hi) { channelSlice<uint8_t>(op.bytes, op.nChannels, c, lo, hi); };

  // 1. Offer (sender) or answer (receiver) every slice; the receiver's step
  // moves only when it releases the slot (3).
  for (int c = first; c < op.nChannels && !*fail; c += step) {
    size_t lo, hi;
    slice(c, &lo, &hi);
    if (hi == lo) continue;  // both ends slice alike
    Conn conn = openConn(op.ch + c, op.peer);
    if (op.isSend) {
      if (!b.waitSend(conn)) break;
      volatile DevP2pDirect* d = directSlot(conn.ch, conn.step);
      if (threadIdx.x == 0) {
        d->src = op.buf + lo;
        d->bytes = hi - lo;
        d->total = op.bytes;
        d->rounds = rounds;
        d->extra = extra;
        d->replySeq = 0;
        d->doneSeq = 0;
      }
      b.post(conn, kDevP2pDirectMark);
      __syncthreads();
      if (!*fail) closeConn(conn);
    } else {
      if (!b.waitRecv(conn, kDevP2pDirectMark, hi - lo)) break;
      volatile DevP2pDirect* d = directSlot(conn.ch, conn.step);
      if (threadIdx.x == 0) {
        if (d->bytes != hi - lo || d->total != op.bytes) {  // the operation's size too: slices may line up
          failKernel(*b.ctx, b.abortA, b.abortB, b.abortN, kDevSizeMismatch, conn.peer, 0, b.ctx->rank, op.bytes,
                     d->total);
          *fail = 1;
        } else {
          d->dst = op.buf + lo;
          d->mid = directSplit(hi - lo, d->rounds, d->extra, rounds, extra);
          __threadfence();
          d->replySeq = conn.step + 1;
        }
      }
    }
    __syncthreads();  // the next slice's openConn reads the step thread 0 stored
  }

  // 2. Copy this end's part of every slice.
  for (int c = first; c < op.nChannels && !*fail; c += step) {
    size_t lo, hi;
    slice(c, &lo, &hi);
    if (hi == lo) continue;
    DevChan* ch = op.ch + c;
    Conn conn = openConn(ch, op.peer);
    if (op.isSend) {
      const uint64_t seq = conn.step;  // the post's
      volatile DevP2pDirect* d = directSlot(ch, seq - 1);
      if (threadIdx.x == 0) {
        if (b.spin(conn, true, [&] { return d->replySeq == seq; })) {
          __threadfence();
          dst = d->dst;
          mid = d->mid;
        } else {
          *fail = 1;
        }
      }
      __syncthreads();
      if (*fail) break;
      copyBytes(reinterpret_cast<const uint8_t*>(op.buf + lo) + mid, reinterpret_cast<uint8_t*>(dst) + mid,
                hi - lo - mid);
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();  // the block's writes (a fence after a barrier is cumulative) before done
        d->doneSeq = seq;
      }
    } else {
      volatile DevP2pDirect* d = directSlot(ch, conn.step);
      if (threadIdx.x == 0) {
        src = d->src;
        mid = d->mid;
      }
      __syncthreads();
      copyBytes(reinterpret_cast<const uint8_t*>(src), reinterpret_cast<uint8_t*>(op.buf + lo), mid);
    }
    __syncthreads();  // src, dst and mid are read again by the next slice
  }
  if (withSelf && !*fail) selfCopies(w);

  // 3. The receiver releases each slot once the sender's part is written; the
  // sender waits until its buffer is no longer read.
  for (int c = first; c < op.nChannels && !*fail; c += step) {
    size_t lo, hi;
    slice(c, &lo, &hi);
    if (hi == lo) continue;
    Conn conn = openConn(op.ch + c, op.peer);
    if (op.isSend) {
      if (threadIdx.x == 0) {
        if (b.spin(conn, true, [&] { return (conn.seen = conn.ch->ctrl->head) >= conn.step; })) closeConn(conn);
        else *fail = 1;
      }
    } else {
      volatile DevP2pDirect* d = directSlot(conn.ch, conn.step);
      const uint64_t seq = conn.step + 1;
      if (threadIdx.x == 0 && !b.spin(conn, false, [&] { return d->doneSeq == seq; })) *fail = 1;
      __syncthreads();
      if (*fail) break;
      b.release(conn);
      __syncthreads();
      closeConn(conn);
    }
    __syncthreads();
  }
}

// Channel c's slice of one send or receive through the slots. All threads.
__device__ void p2pChannel(const DevP2pWork& w, const DevP2pOp& op, int c, int* fail) {
  const Red<uint8_t, DevOp::Sum> r{0, 1};
  size_t lo, hi;
  channelSlice<uint8_t>(op.bytes, op.nChannels, c, &lo, &hi);
  DevChan* ch = op.ch + c;
  Block b{&w.ctx, op.ch, nullptr, w.nChannelsConn, 0, fail};
  if (threadIdx.x == 0 && w.ctx.timeoutNs) b.deadline = globalTimer() + w.ctx.timeoutNs;
  Conn conn = openConn(ch, op.peer);
  const size_t chunk = ch->slotBytes;
  uint8_t* buf = reinterpret_cast<uint8_t*>(op.buf);
  for (size_t off = lo; off < hi; off += chunk) {
    size_t len = minz(chunk, hi - off);
    if (op.isSend) {
      if (!b.waitSend(conn)) break;
      copyIn(r, buf + off, reinterpret_cast<uint8_t*>(b.slot(conn)), nullptr, len);
      b.post(conn, static_cast<uint32_t>(len));
    } else {
      if (!b.waitRecv(conn, static_cast<uint32_t>(len))) break;
      copyIn(r, reinterpret_cast<const uint8_t*>(b.slot(conn)), buf + off, nullptr, len);
      b.release(conn);
    }
  }
  __syncthreads();
  if (!*fail) closeConn(conn);
  __syncthreads();  // the next operation on this channel (openConn) reads the step thread 0 stored
}

// A group's sends and receives: the blocks of an entry run the channels of
// each of its operations in order, block k channels k, k + chansPerEntry, ...
// Both ends of a connector take its channels in increasing order, so however
// many blocks each end runs, the lowest channel not done has both ends on it.
// Every block also copies its share of the copies to self: inside its entry's
// last operation when that is direct (while the peer copies its part), else at
// the end.
__global__ void __launch_bounds__(kThreads, 2) p2pKernel(DevP2pWork w) {
  __shared__ int fail;
  if (threadIdx.x == 0) fail = 0;
  __syncthreads();
  const int entry = blockIdx.x / w.chansPerEntry, first = blockIdx.x % w.chansPerEntry;
  int last = -1;
  for (int i = 0; i < w.nOps; ++i)
    if (w.ops[i].entry == entry) last = i;
  bool selfDone = w.selfBytes == 0;
  for (int i = 0; i < w.nOps && !fail; ++i) {
    const DevP2pOp& op = w.ops[i];
    if (op.entry != entry) continue;
    if (op.direct) {
      const bool withSelf = i == last && !selfDone;
      p2pDirectOp(w, op, first, &fail, withSelf);
      selfDone = selfDone || withSelf;
    } else {
      for (int c = first; c < op.nChannels && !fail; c += w.chansPerEntry) p2pChannel(w, op, c, &fail);
    }
  }
  if (!selfDone && !fail) selfCopies(w);
}

// A group's permutation of sends and receives (DevPermWork): the blocks
// sweep the buffers together; a thread loads pack j of every rank's send
// buffer (U packs each, U x ranks <= 16 in flight), then stores them to the
// receivers'. No waits: the launch follows every rank's stream.
template <int U>
__global__ void __launch_bounds__(kThreads) permuteKernel(DevPermWork w) {
  constexpr int R = kDevMaxDirect / U;  // ranks whose packs a thread holds at once
  const int n = w.n;
  uintptr_t bits = 0;
  for (int k = 0; k < n; ++k) bits |= reinterpret_cast<uintptr_t>(w.send[k]) | reinterpret_cast<uintptr_t>(w.to[k]);
  const size_t stride = static_cast<size_t>(gridDim.x) * kThreads;
  size_t done = 0;
  if ((bits & 15) == 0) {
    const size_t packs = w.bytes / 16;
    for (size_t i = blockIdx.x * static_cast<size_t>(kThreads) * U + threadIdx.x; i < packs; i += stride * U) {
      uint4 v[U][R];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < R; ++k)
          if (k < n && i + u * kThreads < packs) v[u][k] = __ldcs(reinterpret_cast<const uint4*>(w.send[k]) + i + u * kThreads);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < R; ++k)
          if (k < n && i + u * kThreads < packs) __stcs(reinterpret_cast<uint4*>(w.to[k]) + i + u * kThreads, v[u][k]);
    }
    done = packs * 16;
  }
  for (size_t i = done + blockIdx.x * static_cast<size_t>(kThreads) + threadIdx.x; i < w.bytes; i += stride) {
    char v[kDevMaxDirect];
#pragma unroll
    for (int k = 0; k < kDevMaxDirect; ++k)
      if (k < n) v[k] = w.send[k][i];
#pragma unroll
    for (int k = 0; k < kDevMaxDirect; ++k)
      if (k < n) w.to[k][i] = v[k];
  }
}

// Waits for the proxy of a staged operation (and hands it over, given `go`;
// only that, given no `done`).
// Gentle on the memory system (it polls host memory over PCIe): a short sleep
// between reads. The copies in finished before this kernel started, so the
// proxy that reads `go` finds them in host memory (the GPU's writes to it stay
// in order).
__global__ void stageHandoverKernel(volatile uint64_t* go, uint64_t seq, const volatile uint64_t* done, DevCtx ctx) {
  if (go) {
    *go = seq;
    __threadfence_system();
  }
  if (!done) return;  // a hand-over only: the wait comes later on the stream
  const uint64_t deadline = ctx.timeoutNs ? globalTimer() + ctx.timeoutNs : 0;
  for (int iter = 0; *done < seq; ++iter) {
    __nanosleep(200);
    if (iter % 64 != 0) continue;
    // Stop and abort raise `done` themselves; the flag also covers a proxy that
    // cannot (no connectors to abort here).
    if (ctx.status->stop && *done < seq) {
      failKernel(ctx, nullptr, nullptr, 0, kDevStageStopped, -1, 0, -1);
      return;
    }
    if (deadline && iter % 1024 == 0 && globalTimer() > deadline) {
      failKernel(ctx, nullptr, nullptr, 0, kDevStageTimeout, -1, 0, -1);
      return;
    }
  }
}

}  // namespace

cudaError_t devLaunchStageHandover(uint64_t* go, uint64_t seq, const uint64_t* done, const DevCtx& ctx,
                                   cudaStream_t stream) {
  stageHandoverKernel<<<1, 1, 0, stream>>>(go, seq, done, ctx);
  return cudaGetLastError();
}

cudaError_t devLoadStageKernel() {
  cudaFuncAttributes a;
  return cudaFuncGetAttributes(&a, stageHandoverKernel);
}

namespace {

// A collective's launch, a rank's own or several ranks' (DevFusedWork).
template <typename W>
cudaError_t launchAny(const W& work, int blocks, cudaStream_t stream) {
  const DevCollWork& w = workOf(work);
  // The collectives that only move bytes (a one-rank copy is cudaMemcpyAsync).
  if (w.coll == DevColl::Broadcast || w.coll == DevColl::AllGather || w.coll == DevColl::AllToAll ||
      w.coll == DevColl::Gather || w.coll == DevColl::Scatter) {
    W b = work;  // the same bytes, as uint8
    DevCollWork& bw = workOf(b);
    bw.count = w.count * devTypeSize(w.type);
    bw.op = DevOp::Sum;
    switch (w.coll) {
      case DevColl::Broadcast: launchKernel<DevColl::Broadcast, uint8_t, DevOp::Sum>(b, blocks, stream); break;
      case DevColl::AllToAll: launchKernel<DevColl::AllToAll, uint8_t, DevOp::Sum>(b, blocks, stream); break;
      case DevColl::Gather: launchKernel<DevColl::Gather, uint8_t, DevOp::Sum>(b, blocks, stream); break;
      case DevColl::Scatter: launchKernel<DevColl::Scatter, uint8_t, DevOp::Sum>(b, blocks, stream); break;
      default: launchKernel<DevColl::AllGather, uint8_t, DevOp::Sum>(b, blocks, stream); break;
    }
    return cudaGetLastError();
  }
#define ACCL_TYPE_CASE(e, ctype) \
  case e: return devReducing_##e(work, blocks, stream);
  switch (static_cast<ncclDataType_t>(w.type)) {
    ACCL_NATIVE_TYPES(ACCL_TYPE_CASE)
    ACCL_LOWP_TYPES(ACCL_TYPE_CASE)
    default: return cudaErrorInvalidValue;
  }
#undef ACCL_TYPE_CASE
}

}  // namespace

cudaError_t devLaunchColl(const DevCollWork& w, int blocks, cudaStream_t stream) {
  return launchAny(w, blocks, stream);
}

cudaError_t devLaunchFused(const DevFusedWork& f, cudaStream_t stream) {
  return launchAny(f, f.blocksPerRank * f.w.ctx.nranks, stream);
}

cudaError_t devLaunchPermute(const DevPermWork& w, int maxBlocks, cudaStream_t stream) {
  const int u = w.n <= kDevMaxDirect / 8 ? 8 : w.n <= kDevMaxDirect / 4 ? 4 : w.n <= kDevMaxDirect / 2 ? 2 : 1;
  const size_t perBlock = static_cast<size_t>(kThreads) * 16 * u;  // one step of a block
  const int blocks = static_cast<int>(std::max<size_t>(1, std::min<size_t>((w.bytes + perBlock - 1) / perBlock, maxBlocks)));
  if (u == 8) permuteKernel<8><<<blocks, kThreads, 0, stream>>>(w);
  else if (u == 4) permuteKernel<4><<<blocks, kThreads, 0, stream>>>(w);
  else if (u == 2) permuteKernel<2><<<blocks, kThreads, 0, stream>>>(w);
  else permuteKernel<1><<<blocks, kThreads, 0, stream>>>(w);
  return cudaGetLastError();
}

cudaError_t devLaunchP2p(const DevP2pWork& w, cudaStream_t stream) {
  p2pKernel<<<w.nBlocks, kThreads, 0, stream>>>(w);
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
