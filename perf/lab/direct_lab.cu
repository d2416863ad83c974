// Lab (built by hand, not by CMake): which loop shape moves the direct collectives' bytes
// fastest on the H200. 2 "ranks" on one GPU: out0 = out1 = in0 + in1 (float),
// and the copy pattern out0 = out1 = in0. Each variant: one kernel over all
// SMs, or two kernels (one per rank, on two streams) with the library's
// start/end barrier. Prints us per call and GB/s of traffic (read + write).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e));      \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

struct Slot {
  unsigned long long published, finished, claim;
  unsigned long long pad[13];
};

struct Args {
  const float4* in0;
  const float4* in1;
  float4* out0;
  float4* out1;
  size_t packs;       // float4 per buffer
  size_t lo, hi;      // this kernel's range of packs
  Slot* slots;        // 2 slots when barriered
  int me, nranks;     // barriered: this kernel's rank
  unsigned long long call;
  int barrier;
  unsigned long long* claim;  // dynamic: counter (reset by host memset per call)
};

enum Mode { kStatic = 0, kStaticCs = 1, kGrid = 2, kDynamic = 3, kStaticNc = 4 };

template <int U, bool Reduce, int Store>
__device__ __forceinline__ void body(const Args& a, size_t i0, size_t stride, size_t end) {
  for (size_t i = i0; i < end; i += stride) {
    float4 va[U], vb[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const size_t j = i + u * blockDim.x;
      if (j < end) {
        va[u] = __ldcg(a.in0 + j);
        if (Reduce) vb[u] = __ldcg(a.in1 + j);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const size_t j = i + u * blockDim.x;
      if (j >= end) break;
      float4 o = va[u];
      if (Reduce) {
        o.x += vb[u].x;
        o.y += vb[u].y;
        o.z += vb[u].z;
        o.w += vb[u].w;
      }
      if (Store == 1) {
        __stcs(a.out0 + j, o);
        __stcs(a.out1 + j, o);
      } else {
        a.out0[j] = o;
        a.out1[j] = o;
      }
    }
  }
}

__device__ void barrierStart(const Args& a) {
  if (threadIdx.x == 0) {
    if (blockIdx.x == 0) {
      __threadfence();
      atomicExch(&a.slots[a.me].published, a.call);
    }
    for (int k = 0; k < a.nranks; ++k)
      while (*reinterpret_cast<volatile unsigned long long*>(&a.slots[k].published) < a.call) {
      }
    __threadfence();
  }
  __syncthreads();
}

__device__ void barrierEnd(const Args& a) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(&a.slots[a.me].finished, 1ull);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const unsigned long long t = a.call * gridDim.x;
    for (int k = 0; k < a.nranks; ++k)
      while (*reinterpret_cast<volatile unsigned long long*>(&a.slots[k].finished) < t) {
      }
  }
}

template <int U, bool Reduce, int Mode_>
__global__ void __launch_bounds__(512, 1) lab(Args a) {
  if (a.barrier) barrierStart(a);
  const size_t chunk = size_t(U) * blockDim.x;
  constexpr int Store = Mode_ == kStaticCs ? 1 : 0;
  if (Mode_ == kStatic || Mode_ == kStaticCs) {
    const size_t n = a.hi - a.lo;
    const size_t per = (n / gridDim.x + chunk - 1) / chunk * chunk;  // whole chunks per block
    size_t blo = a.lo + per * blockIdx.x, bhi = blo + per;
    if (bhi > a.hi) bhi = a.hi;
    if (blo < a.hi) body<U, Reduce, Store>(a, blo + threadIdx.x, chunk, bhi);
  } else if (Mode_ == kGrid) {
    body<U, Reduce, Store>(a, a.lo + blockIdx.x * chunk + threadIdx.x, chunk * gridDim.x, a.hi);
  } else if (Mode_ == kDynamic) {
    __shared__ unsigned long long next[2];
    if (threadIdx.x == 0) next[0] = atomicAdd(a.claim, 1ull);
    __syncthreads();
    for (int it = 0;; ++it) {
      const unsigned long long c = next[it & 1];
      const size_t lo = a.lo + c * chunk;
      if (lo >= a.hi) break;
      if (threadIdx.x == 0) next[(it + 1) & 1] = atomicAdd(a.claim, 1ull);  // in flight with this chunk
      size_t hi = lo + chunk;
      if (hi > a.hi) hi = a.hi;
      body<U, Reduce, Store>(a, lo + threadIdx.x, chunk, hi);
      __syncthreads();
    }
  }
  if (a.barrier) barrierEnd(a);
}

template <int U, bool Reduce, int Mode_>
__global__ void __launch_bounds__(256, 2) lab256(Args a) {
  if (a.barrier) barrierStart(a);
  const size_t chunk = size_t(U) * blockDim.x;
  const size_t n = a.hi - a.lo;
  const size_t per = (n / gridDim.x + chunk - 1) / chunk * chunk;
  size_t blo = a.lo + per * blockIdx.x, bhi = blo + per;
  if (bhi > a.hi) bhi = a.hi;
  if (blo < a.hi) body<U, Reduce, 0>(a, blo + threadIdx.x, chunk, bhi);
  if (a.barrier) barrierEnd(a);
}

using KernelFn = void (*)(Args);

struct Variant {
  const char* name;
  KernelFn reduce, copy;
  int threads, blocksPerSm;
  bool dynamic;
};

int main(int argc, char** argv) {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<size_t> sizes = {1 << 20, 64 << 20, 256 << 20};  // bytes per buffer
  const size_t maxBytes = sizes.back();
  float4 *in0, *in1, *out0, *out1;
  CK(cudaMalloc(&in0, maxBytes));
  CK(cudaMalloc(&in1, maxBytes));
  CK(cudaMalloc(&out0, maxBytes));
  CK(cudaMalloc(&out1, maxBytes));
  CK(cudaMemset(in0, 0, maxBytes));
  CK(cudaMemset(in1, 0, maxBytes));
  Slot* slots;
  CK(cudaMalloc(&slots, 4 * sizeof(Slot)));
  unsigned long long* claims;
  CK(cudaMalloc(&claims, 2 * sizeof(unsigned long long)));
  cudaStream_t s[2];
  CK(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
  cudaEvent_t e0, e1, fork, join;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  const int iters = 20;

  // Copy reference: cudaMemcpy D2D, read + write.
  for (size_t bytes : sizes) {
    CK(cudaMemcpyAsync(out0, in0, bytes, cudaMemcpyDeviceToDevice, s[0]));
    CK(cudaEventRecord(e0, s[0]));
    for (int i = 0; i < iters; ++i) CK(cudaMemcpyAsync(out0, in0, bytes, cudaMemcpyDeviceToDevice, s[0]));
    CK(cudaEventRecord(e1, s[0]));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    const double us = ms * 1000 / iters;
    printf("memcpy %10zu B: %8.1f us  %6.0f GB/s (read+write)\n", bytes, us, 2.0 * bytes / us / 1e3);
  }

  Variant vs[] = {
      {"static512x4", lab<4, true, kStatic>, lab<4, false, kStatic>, 512, 1, false},
      {"static512x4cs", lab<4, true, kStaticCs>, lab<4, false, kStaticCs>, 512, 1, false},
      {"static512x8", lab<8, true, kStatic>, lab<8, false, kStatic>, 512, 1, false},
      {"grid512x4", lab<4, true, kGrid>, lab<4, false, kGrid>, 512, 1, false},
      {"dyn512x4", lab<4, true, kDynamic>, lab<4, false, kDynamic>, 512, 1, true},
      {"dyn512x2", lab<2, true, kDynamic>, lab<2, false, kDynamic>, 512, 1, true},
      {"static256x4b2", lab256<4, true, 0>, lab256<4, false, 0>, 256, 2, false},
      {"static256x2b2", lab256<2, true, 0>, lab256<2, false, 0>, 256, 2, false},
  };
  unsigned long long call = 0;
  for (int ranks : {1, 2}) {  // 1: one kernel over all SMs; 2: two barriered kernels
    for (bool reduce : {true, false}) {
      for (const Variant& v : vs) {
        for (size_t bytes : sizes) {
          const size_t packs = bytes / 16;
          // Traffic: reduce reads 2 writes 2; copy reads 1 (per rank's share) writes 2.
          const double traffic = reduce ? 4.0 * bytes : 3.0 * bytes;
          auto launch = [&](cudaStream_t st) {
            if (ranks == 1) {
              Args a{in0, in1, out0, out1, packs, 0, packs, slots, 0, 1, 0, 0, claims};
              if (v.dynamic) CK(cudaMemsetAsync(claims, 0, 8, st));
              (reduce ? v.reduce : v.copy)<<<sms * v.blocksPerSm, v.threads, 0, st>>>(a);
            } else {
              ++call;
              CK(cudaEventRecord(fork, st));
              CK(cudaStreamWaitEvent(s[1], fork));
              for (int r = 0; r < 2; ++r) {
                cudaStream_t rs = r == 0 ? st : s[1];
                Args a{in0, in1, out0, out1, packs, packs / 2 * r, r ? packs : packs / 2, slots, r, 2, call, 1,
                       claims + r};
                if (v.dynamic) CK(cudaMemsetAsync(claims + r, 0, 8, rs));
                (reduce ? v.reduce : v.copy)<<<sms * v.blocksPerSm / 2, v.threads, 0, rs>>>(a);
              }
              CK(cudaEventRecord(join, s[1]));
              CK(cudaStreamWaitEvent(st, join));
            }
            CK(cudaGetLastError());
          };
          // The barrier counts (finished) are cumulative: reset with the call number.
          CK(cudaMemset(slots, 0, 4 * sizeof(Slot)));
          call = 0;
          launch(s[0]);  // warm-up
          CK(cudaStreamSynchronize(s[0]));
          CK(cudaMemset(slots, 0, 4 * sizeof(Slot)));
          call = 0;
          // Graph of iters calls, so that launch gaps are the GPU's alone.
          cudaGraph_t g;
          cudaGraphExec_t ge;
          CK(cudaStreamBeginCapture(s[0], cudaStreamCaptureModeGlobal));
          for (int i = 0; i < iters; ++i) launch(s[0]);
          CK(cudaStreamEndCapture(s[0], &g));
          CK(cudaGraphInstantiate(&ge, g, 0));
          // A graph replays the same call numbers: reset the slots before each.
          auto replay = [&]() {
            CK(cudaMemsetAsync(slots, 0, 4 * sizeof(Slot), s[0]));
            CK(cudaGraphLaunch(ge, s[0]));
          };
          replay();
          CK(cudaStreamSynchronize(s[0]));
          float best = 1e30f;
          for (int rep = 0; rep < 3; ++rep) {
            CK(cudaMemsetAsync(slots, 0, 4 * sizeof(Slot), s[0]));
            CK(cudaEventRecord(e0, s[0]));
            CK(cudaGraphLaunch(ge, s[0]));
            CK(cudaEventRecord(e1, s[0]));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (ms < best) best = ms;
          }
          CK(cudaGraphExecDestroy(ge));
          CK(cudaGraphDestroy(g));
          const double us = best * 1000 / iters;
          printf("%d rank(s) %-6s %-14s %10zu B: %8.1f us  %6.0f GB/s\n", ranks, reduce ? "reduce" : "copy", v.name,
                 bytes, us, traffic / us / 1e3);
        }
      }
    }
  }
  // No results are checked: a bandwidth lab (the library's kernels are checked by tests/gpu).
  return 0;
}
