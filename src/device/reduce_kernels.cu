// CUDA reduction kernels over the same operators as the host executor
// (device/reduce_ops.h). The device data path (connectors in GPU memory,
// one block per channel) builds on these; for now they are compiled and
// exercised only by the device-mode tests that come with it.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "device/lowp.h"
#include "device/reduce_ops.h"
#include "nccl.h"

namespace accl {

template <typename T, template <typename> class Op>
__global__ void reduceKernel(T* dst, const T* a, const T* b, size_t count) {
  Op<T> op;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = op(a[i], b[i]);
}

// Launches dst = op(a, b) on `stream`; cudaErrorInvalidValue for an unsupported pair.
cudaError_t launchDeviceReduce(void* dst, const void* a, const void* b, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, cudaStream_t stream) {
  const int threads = 256;
  const int blocks = static_cast<int>(count / threads + 1 < 1024 ? count / threads + 1 : 1024);
#define ACCL_OP_CASE(opEnum, OpT)                                                                     \
  case opEnum:                                                                                        \
    reduceKernel<CT, OpT><<<blocks, threads, 0, stream>>>(static_cast<CT*>(dst), static_cast<const CT*>(a), \
                                                          static_cast<const CT*>(b), count);         \
    return cudaGetLastError();
#define ACCL_TYPE_CASE(typeEnum, ctype) \
  case typeEnum: {                      \
    using CT = ctype;                   \
    switch (op) {                       \
      ACCL_BASIC_OPS(ACCL_OP_CASE)      \
      default: return cudaErrorInvalidValue; \
    }                                   \
  }
  switch (type) {
    ACCL_NATIVE_TYPES(ACCL_TYPE_CASE)
    ACCL_LOWP_TYPES(ACCL_TYPE_CASE)
    default: return cudaErrorInvalidValue;
  }
#undef ACCL_TYPE_CASE
#undef ACCL_OP_CASE
}

}  // namespace accl
