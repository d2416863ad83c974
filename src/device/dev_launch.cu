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

// One channel's slice [buf, buf + len) of a direct send or receive
// (DevP2pDirect): both ends copy half, the receiver the first. All threads.
__device__ bool p2pDirect(Block& b, Conn& conn, const DevP2pOp& op, char* buf, size_t len) {
  __shared__ const char* src;
  __shared__ char* dst;
  if (op.isSend) {
    if (!b.waitSend(conn)) return false;
    volatile DevP2pDirect* d = reinterpret_cast<volatile DevP2pDirect*>(b.slot(conn));
    if (threadIdx.x == 0) {
      d->src = buf;
      d->bytes = len;
      d->replySeq = 0;
      d->doneSeq = 0;
    }
    b.post(conn, kDevP2pDirectMark);
    const uint64_t seq = conn.step;
    if (threadIdx.x == 0 && !*b.fail) {
      if (b.spin(conn, true, [&] { return d->replySeq == seq; })) {
        __threadfence();
        dst = d->dst;
      } else {
        *b.fail = 1;
      }
    }
    __syncthreads();
    if (*b.fail) return false;
    const size_t mid = len / 2 / 64 * 64;
    copyBytes(reinterpret_cast<const uint8_t*>(buf) + mid, reinterpret_cast<uint8_t*>(dst) + mid, len - mid);
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();  // the block's writes (a fence after a barrier is cumulative) before done
      d->doneSeq = seq;
      // The receiver may still read this rank's buffer until it releases.
      if (!b.spin(conn, true, [&] { return (conn.seen = conn.ch->ctrl->head) >= seq; })) *b.fail = 1;
    }
    __syncthreads();
    return !*b.fail;
  }
  if (!b.waitRecv(conn, kDevP2pDirectMark, len)) return false;
  volatile DevP2pDirect* d = reinterpret_cast<volatile DevP2pDirect*>(b.slot(conn));
  const uint64_t seq = conn.step + 1;
  if (threadIdx.x == 0) {
    src = d->src;
    if (d->bytes != len) {
      failKernel(*b.ctx, b.abortA, b.abortB, b.abortN, kDevSizeMismatch, conn.peer, 0, b.ctx->rank, len, d->bytes);
      *b.fail = 1;
    } else {
      d->dst = buf;
      __threadfence();
      d->replySeq = seq;
    }
  }
  __syncthreads();
  if (*b.fail) return false;
  copyBytes(reinterpret_cast<const uint8_t*>(src), reinterpret_cast<uint8_t*>(buf), len / 2 / 64 * 64);
  __syncthreads();
  if (threadIdx.x == 0 && !b.spin(conn, false, [&] { return d->doneSeq == seq; })) *b.fail = 1;
  __syncthreads();
  if (*b.fail) return false;
  b.release(conn);
  return true;
}

// Channel c's slice of one send or receive (or self copy). All threads.
__device__ void p2pChannel(const DevP2pWork& w, const DevP2pOp& op, int c, int* fail) {
  const Red<uint8_t, DevOp::Sum> r{0, 1};
  size_t lo, hi;
  channelSlice<uint8_t>(op.bytes, op.nChannels, c, &lo, &hi);
  if (!op.ch) {  // a send to self, matched with its receive
    copyIn(r, reinterpret_cast<const uint8_t*>(op.src) + lo, reinterpret_cast<uint8_t*>(op.buf) + lo, nullptr,
           hi - lo);
    return;
  }
  DevChan* ch = op.ch + c;
  Block b{&w.ctx, op.ch, nullptr, w.nChannelsConn, 0, fail};
  if (threadIdx.x == 0 && w.ctx.timeoutNs) b.deadline = globalTimer() + w.ctx.timeoutNs;
  Conn conn = openConn(ch, op.peer);
  if (op.direct) {
    if (hi > lo) p2pDirect(b, conn, op, op.buf + lo, hi - lo);
  } else {
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
  }
  __syncthreads();
  if (!*fail) closeConn(conn);
  __syncthreads();  // the next operation on this channel (openConn) reads the step thread 0 stored
}

// A group's sends and receives: the blocks of an entry run the channels of
// each of its operations in order, block k channels k, k + chansPerEntry, ...
// Both ends of a connector take its channels in increasing order, so however
// many blocks each end runs, the lowest channel not done has both ends on it.
__global__ void __launch_bounds__(kThreads, 2) p2pKernel(DevP2pWork w) {
  __shared__ int fail;
  if (threadIdx.x == 0) fail = 0;
  __syncthreads();
  const int entry = blockIdx.x / w.chansPerEntry, first = blockIdx.x % w.chansPerEntry;
  for (int i = 0; i < w.nOps && !fail; ++i) {
    const DevP2pOp& op = w.ops[i];
    if (op.entry != entry) continue;
    for (int c = first; c < op.nChannels && !fail; c += w.chansPerEntry) p2pChannel(w, op, c, &fail);
  }
}

// Waits for the proxy of a staged operation (and hands it over, given `go`).
// Gentle on the memory system (it polls host memory over PCIe): a short sleep
// between reads. The copies in finished before this kernel started, so the
// proxy that reads `go` finds them in host memory (the GPU's writes to it stay
// in order).
__global__ void stageHandoverKernel(volatile uint64_t* go, uint64_t seq, const volatile uint64_t* done, DevCtx ctx) {
  if (go) {
    *go = seq;
    __threadfence_system();
  }
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

cudaError_t devLaunchColl(const DevCollWork& w, int blocks, cudaStream_t stream) {
  // Broadcast and allgather only move bytes (a one-rank copy is cudaMemcpyAsync).
  if (w.coll == DevColl::Broadcast || w.coll == DevColl::AllGather) {
    DevCollWork b = w;  // the same bytes, as uint8
    b.count = w.count * devTypeSize(w.type);
    b.op = DevOp::Sum;
    if (w.coll == DevColl::Broadcast)
      collKernel<DevColl::Broadcast, uint8_t, DevOp::Sum><<<blocks, kThreads, 0, stream>>>(b);
    else
      collKernel<DevColl::AllGather, uint8_t, DevOp::Sum><<<blocks, kThreads, 0, stream>>>(b);
    return cudaGetLastError();
  }
#define ACCL_TYPE_CASE(e, ctype) \
  case e: return devReducing_##e(w, blocks, stream);
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
