// The CUDA executor's entry points: collectives that only move bytes, the
// point-to-point kernel, and the dispatch of the reducing collectives to their
// per-datatype translation units.
#include "device/dev_colls.cuh"
#include "device/dev_reducing.h"

namespace accl {
namespace {

// A group's sends and receives: block (entry, channel) runs that channel's
// slice of each operation of its entry, in order.
__global__ void __launch_bounds__(kThreads, 2) p2pKernel(DevP2pWork w) {
  __shared__ int fail;
  if (threadIdx.x == 0) fail = 0;
  __syncthreads();
  const int entry = blockIdx.x / w.chansPerEntry, c = blockIdx.x % w.chansPerEntry;
  const Red<uint8_t, DevOp::Sum> r{0, 1};
  for (int i = 0; i < w.nOps && !fail; ++i) {
    const DevP2pOp& op = w.ops[i];
    if (op.entry != entry || c >= op.nChannels) continue;
    size_t lo, hi;
    channelSlice<uint8_t>(op.bytes, op.nChannels, c, &lo, &hi);
    if (!op.ch) {  // a send to self, matched with its receive
      copyIn(r, reinterpret_cast<const uint8_t*>(op.src) + lo, reinterpret_cast<uint8_t*>(op.buf) + lo, nullptr,
             hi - lo);
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
        copyIn(r, buf + off, reinterpret_cast<uint8_t*>(b.slot(conn)), nullptr, len);
        b.post(conn, static_cast<uint32_t>(len));
      } else {
        if (!b.waitRecv(conn, static_cast<uint32_t>(len))) break;
        copyIn(r, reinterpret_cast<const uint8_t*>(b.slot(conn)), buf + off, nullptr, len);
        b.release(conn);
      }
    }
    __syncthreads();
    if (!fail) closeConn(conn);
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
