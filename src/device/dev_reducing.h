// One launcher per datatype for the collectives that do arithmetic, each in its
// own translation unit (device/dev_reducing.cu.in, configured by CMake per
// datatype) so that they compile in parallel; device/dev_launch.cu picks one.
#pragma once

#include <cuda_runtime.h>

#include "device/dev_types.h"
#include "device/lowp.h"
#include "device/reduce_ops.h"
#include "nccl.h"

namespace accl {

// The element type of a datatype.
template <ncclDataType_t E>
struct DevCType;
#define ACCL_DEV_CTYPE(e, ctype) \
  template <>                    \
  struct DevCType<e> {           \
    using type = ctype;          \
  };
ACCL_NATIVE_TYPES(ACCL_DEV_CTYPE)
ACCL_LOWP_TYPES(ACCL_DEV_CTYPE)
#undef ACCL_DEV_CTYPE

#define ACCL_DEV_REDUCING_DECL(e, ctype)                                              \
  cudaError_t devReducing_##e(const DevCollWork& w, int blocks, cudaStream_t s); \
  cudaError_t devReducing_##e(const DevFusedWork& f, int blocks, cudaStream_t s);
ACCL_NATIVE_TYPES(ACCL_DEV_REDUCING_DECL)
ACCL_LOWP_TYPES(ACCL_DEV_REDUCING_DECL)
#undef ACCL_DEV_REDUCING_DECL

}  // namespace accl
