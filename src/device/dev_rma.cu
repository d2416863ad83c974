// Kernels of the one-sided operations on device windows (coll/rma_dev.cc):
// raising a signal in a peer's signal array, and ncclWaitSignal.
#include "device/dev_launch.h"
#include "device/dev_prims.cuh"

namespace accl {
namespace {

// After the put's copy on the same stream, so the data has landed before the
// peer can count the signal. System scope: the array may be another GPU's.
__global__ void rmaSignalKernel(unsigned long long* signal) {
  __threadfence_system();
  atomicAdd_system(signal, 1ull);
}

__global__ void rmaWaitKernel(DevRmaWait w) {
  const uint64_t deadline = w.ctx.timeoutNs ? globalTimer() + w.ctx.timeoutNs : 0;
  const volatile uint64_t* signals = w.signals;
  bool ok = true;
  for (int i = 0; i < w.n && ok; ++i) {
    const int p = w.peer[i];
    for (int iter = 0; signals[p] - w.consumed[p] < w.need[i]; ++iter) {
      __nanosleep(100);
      if (iter % 256 != 0) continue;
      const int reason = w.ctx.status->stop ? kDevSignalStopped
                         : deadline && globalTimer() > deadline ? kDevSignalTimeout : kDevOk;
      if (reason != kDevOk) {
        failKernel(w.ctx, nullptr, nullptr, 0, reason, p, 0, -1, static_cast<uint32_t>(w.need[i]),
                   static_cast<uint32_t>(signals[p] - w.consumed[p]));
        ok = false;
        break;
      }
    }
  }
  // Consumed only once every entry is satisfied: a failed wait takes nothing.
  for (int i = 0; i < w.n && ok; ++i) w.consumed[w.peer[i]] += w.need[i];
  if (w.finished) {  // eager waits only (a captured one ends on every replay)
    __threadfence_system();
    atomicAdd_system(w.finished, 1u);
  }
}

}  // namespace

// CUDA loads kernels lazily, and loading may wait for the kernels running in
// the context: a rank's wait kernel spins until another rank's signal kernel
// runs, so in one process the signal kernel must be loaded before any wait.
cudaError_t devLoadRmaKernels() {
  cudaFuncAttributes a;
  cudaError_t e = cudaFuncGetAttributes(&a, rmaSignalKernel);
  return e != cudaSuccess ? e : cudaFuncGetAttributes(&a, rmaWaitKernel);
}

cudaError_t devLaunchSignal(uint64_t* signal, cudaStream_t stream) {
  rmaSignalKernel<<<1, 1, 0, stream>>>(reinterpret_cast<unsigned long long*>(signal));
  return cudaGetLastError();
}

cudaError_t devLaunchWaitSignal(const DevRmaWait& w, cudaStream_t stream) {
  rmaWaitKernel<<<1, 1, 0, stream>>>(w);
  return cudaGetLastError();
}

}  // namespace accl
