// Reduction operators, written once for the host executor and CUDA kernels.
// Integer arithmetic wraps (computed unsigned), as two's-complement hardware
// and NCCL's kernels do, instead of being undefined on overflow.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define ACCL_HD __host__ __device__ __forceinline__
#else
#define ACCL_HD inline
#endif

namespace accl {

// The type integer arithmetic is done in: unsigned, so overflow wraps.
template <typename T, bool = std::is_integral<T>::value>
struct ArithType { using type = T; };
template <typename T>
struct ArithType<T, true> { using type = typename std::make_unsigned<T>::type; };
template <typename T>
using Wide = typename ArithType<T>::type;

template <typename T>
struct OpSum {
  ACCL_HD T operator()(T a, T b) const { return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b)); }
};
template <typename T>
struct OpProd {
  ACCL_HD T operator()(T a, T b) const { return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b)); }
};
// max/min: comparisons for integers; fmax/fmin for float and double (a NaN
// operand is ignored, as NCCL's kernels do). The low-precision types have their
// own (device/lowp.h).
template <typename T>
struct OpMax {
  ACCL_HD T operator()(T a, T b) const { return a < b ? b : a; }
};
template <typename T>
struct OpMin {
  ACCL_HD T operator()(T a, T b) const { return b < a ? b : a; }
};

template <>
struct OpMax<float> {
  ACCL_HD float operator()(float a, float b) const { return fmaxf(a, b); }
};
template <>
struct OpMin<float> {
  ACCL_HD float operator()(float a, float b) const { return fminf(a, b); }
};
template <>
struct OpMax<double> {
  ACCL_HD double operator()(double a, double b) const { return fmax(a, b); }
};
template <>
struct OpMin<double> {
  ACCL_HD double operator()(double a, double b) const { return fmin(a, b); }
};

// The datatypes the executors handle natively, as an X-macro: X(ncclEnum, C type).
// float16, bfloat16 and the fp8 types are in device/lowp.h (ACCL_LOWP_TYPES).
#define ACCL_NATIVE_TYPES(X) \
  X(ncclInt8, int8_t)        \
  X(ncclUint8, uint8_t)      \
  X(ncclInt32, int32_t)      \
  X(ncclUint32, uint32_t)    \
  X(ncclInt64, int64_t)      \
  X(ncclUint64, uint64_t)    \
  X(ncclFloat32, float)      \
  X(ncclFloat64, double)

#define ACCL_BASIC_OPS(X) X(ncclSum, OpSum) X(ncclProd, OpProd) X(ncclMax, OpMax) X(ncclMin, OpMin)

}  // namespace accl
