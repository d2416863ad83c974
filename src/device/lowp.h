// Low-precision floating types (float16, bfloat16, fp8 e4m3fn, fp8 e5m2) for
// the host executor and CUDA kernels: storage types, exact round-to-nearest-
// even conversions to and from float (bit manipulation, and only exact
// floating-point steps; no CUDA headers, no floating-point environment
// dependence: FTZ/DAZ and rounding mode do not matter), and reduction operators that give the results NVIDIA NCCL's
// kernels give (src/device/reduce_kernel.h). docs/datatypes.md has the
// sources; the short version:
//
//  * half / bf16: NCCL combines with __hadd/__hmul/__hmax/__hmin (sm_80+),
//    i.e. the exact result rounded once to the type. Computing in float and
//    rounding to the type gives the same bits for +, * (float has 24 >= 2p+2
//    significand bits, so the double rounding is innocuous).
//  * fp8: NCCL (fp8 kernels exist for sm_90+ only) converts to __half,
//    combines in half (__hadd/__hmul/__hmax/__hmin), converts back with
//    __nv_fp8_e4m3(__half) / __nv_fp8_e5m2(__half), i.e.
//    __nv_cvt_halfraw_to_fp8(h, __NV_SATFINITE, ...). roundResult<fp8>()
//    models that: float result -> RNE half -> RNE fp8, saturating.
//  * __NV_SATFINITE: |x| beyond the largest finite value, *including
//    infinity*, becomes +-max finite (e4m3 448 = 0x7e, e5m2 57344 = 0x7b);
//    NaN becomes the canonical NaN 0x7f. So an e5m2 infinity does not survive
//    a reduction (inf + 1 = 57344, max(inf, 0) = 57344), as in NCCL.
//  * max/min follow __hmax/__hmin: a NaN operand is ignored (both NaN gives
//    the canonical NaN), +0 > -0.
//  * PreMulSum rounds the premultiplied input to T before adding (NCCL's
//    preOp stores T), and the scalar itself is a T (ncclAvg: T(float(1/n))).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#if !defined(__CUDA_ARCH__)
#include <cstring>
#endif

#include "device/reduce_ops.h"  // ACCL_HD and OpSum/OpProd/OpMax/OpMin

namespace accl {

// ---------------------------------------------------------------------------
// Storage types: the bits of the real types, trivially copyable, same size.
struct half_t { uint16_t bits; };
struct bf16_t { uint16_t bits; };
struct fp8e4m3_t { uint8_t bits; };
struct fp8e5m2_t { uint8_t bits; };
static_assert(sizeof(half_t) == 2 && sizeof(bf16_t) == 2, "16-bit storage");
static_assert(sizeof(fp8e4m3_t) == 1 && sizeof(fp8e5m2_t) == 1, "8-bit storage");
static_assert(std::is_trivial<half_t>::value && std::is_trivial<fp8e4m3_t>::value, "trivial storage");

template <typename T> struct IsLowp : std::false_type {};
template <> struct IsLowp<half_t> : std::true_type {};
template <> struct IsLowp<bf16_t> : std::true_type {};
template <> struct IsLowp<fp8e4m3_t> : std::true_type {};
template <> struct IsLowp<fp8e5m2_t> : std::true_type {};

// X(ncclEnum, storage type), like ACCL_NATIVE_TYPES.
#ifndef ACCL_LOWP_TYPES
#define ACCL_LOWP_TYPES(X)      \
  X(ncclFloat16, half_t)        \
  X(ncclBfloat16, bf16_t)       \
  X(ncclFloat8e4m3, fp8e4m3_t)  \
  X(ncclFloat8e5m2, fp8e5m2_t)
#endif

namespace lowp_detail {

ACCL_HD uint32_t bitsOf(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
ACCL_HD float floatOf(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// float32 bits -> a small binary format with M mantissa bits and exponent
// bias BIAS (E = its exponent width), round to nearest even, subnormals
// included. Results above MAXFIN (the largest finite encoding, sign
// stripped) become OVF; NaN becomes NANENC (canonical, positive). Only
// integer operations.
template <int E, int M, int BIAS, uint32_t MAXFIN, uint32_t OVF, uint32_t NANENC>
ACCL_HD uint32_t narrow(uint32_t x) {
  const uint32_t sign = (x >> 31) << (E + M);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return NANENC;
  uint32_t r;
  if (ax >= (uint32_t(128 - BIAS) << 23)) {  // normal in the target (or overflow, incl. inf)
    r = ax - (uint32_t(127 - BIAS) << 23);   // rebias the exponent
    r += ((1u << (22 - M)) - 1u) + ((r >> (23 - M)) & 1u);
    r >>= (23 - M);
  } else {  // subnormal (or zero) in the target
    const uint32_t e = ax >> 23;
    const uint32_t mant = e ? ((ax & 0x7fffffu) | 0x800000u) : ax;
    // value = mant * 2^(max(e,1) - 150); target unit = 2^(1 - BIAS - M)
    const uint32_t shift = uint32_t(151 - BIAS - M) - (e ? e : 1u);
    if (shift > 24) return sign;  // below half the smallest subnormal
    const uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    r = q + ((rem > halfway) | ((rem == halfway) & q & 1u));
  }
  if (r > MAXFIN) r = OVF;
  return sign | r;
}

}  // namespace lowp_detail

// ---------------------------------------------------------------------------
// To float: exact. NaN stays NaN (payload not significant).
ACCL_HD float toFloat(half_t h) {
  const uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  const uint32_t em = h.bits & 0x7fffu;
  uint32_t o = (em << 13) + (uint32_t(127 - 15) << 23);
  const uint32_t exp = em & 0x7c00u;
  if (exp == 0x7c00u) {
    o += uint32_t(128 - 16) << 23;  // inf / NaN: exponent all ones
  } else if (exp == 0) {
    // zero / subnormal: m * 2^-24, exact in every rounding mode (an integer
    // below 2^10 times a power of two), and a normal float, so FTZ cannot bite
    return lowp_detail::floatOf(lowp_detail::bitsOf(static_cast<float>(em) * lowp_detail::floatOf(103u << 23)) | sign);
  }
  return lowp_detail::floatOf(o | sign);
}
ACCL_HD float toFloat(bf16_t b) { return lowp_detail::floatOf(uint32_t(b.bits) << 16); }
ACCL_HD float toFloat(fp8e5m2_t v) { return toFloat(half_t{static_cast<uint16_t>(v.bits << 8)}); }  // e5m2 = top byte of a half
ACCL_HD float toFloat(fp8e4m3_t v) {
  const uint32_t sign = uint32_t(v.bits & 0x80u) << 24;
  const uint32_t em = v.bits & 0x7fu;
  if (em == 0x7fu) return lowp_detail::floatOf(0x7fc00000u | sign);  // the only NaN pattern
  if ((em & 0x78u) == 0)  // zero / subnormal: m * 2^-9, exact as for half
    return lowp_detail::floatOf(lowp_detail::bitsOf(static_cast<float>(em) * lowp_detail::floatOf(118u << 23)) | sign);
  return lowp_detail::floatOf(((em << 20) + (uint32_t(127 - 7) << 23)) | sign);
}

// ---------------------------------------------------------------------------
// From float: round to nearest even, as CUDA's conversions do:
//   half  = __float2half_rn   (overflow -> inf, NaN -> 0x7fff)
//   bf16  = __float2bfloat16_rn (overflow -> inf, NaN -> 0x7fff)
//   fp8   = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, kind), what the
//           __nv_fp8_e4m3/__nv_fp8_e5m2 constructors use: overflow and +-inf
//           -> +-max finite, NaN -> 0x7f.
template <typename T> ACCL_HD T fromFloat(float f);
template <> ACCL_HD half_t fromFloat<half_t>(float f) {
  return half_t{static_cast<uint16_t>(lowp_detail::narrow<5, 10, 15, 0x7bffu, 0x7c00u, 0x7fffu>(lowp_detail::bitsOf(f)))};
}
template <> ACCL_HD bf16_t fromFloat<bf16_t>(float f) {
  const uint32_t x = lowp_detail::bitsOf(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return bf16_t{0x7fffu};
  return bf16_t{static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16)};  // overflow carries into inf
}
template <> ACCL_HD fp8e4m3_t fromFloat<fp8e4m3_t>(float f) {
  return fp8e4m3_t{static_cast<uint8_t>(lowp_detail::narrow<4, 3, 7, 0x7eu, 0x7eu, 0x7fu>(lowp_detail::bitsOf(f)))};
}
template <> ACCL_HD fp8e5m2_t fromFloat<fp8e5m2_t>(float f) {
  return fp8e5m2_t{static_cast<uint8_t>(lowp_detail::narrow<5, 2, 15, 0x7bu, 0x7bu, 0x7fu>(lowp_detail::bitsOf(f)))};
}

// The __NV_NOSAT variants (IEEE-style overflow: e4m3 -> NaN 0x7f, e5m2 -> inf
// 0x7c; +-inf likewise). NCCL does not use these; ml_dtypes' casts behave so.
ACCL_HD fp8e4m3_t fp8e4m3FromFloatNoSat(float f) {
  return fp8e4m3_t{static_cast<uint8_t>(lowp_detail::narrow<4, 3, 7, 0x7eu, 0x7fu, 0x7fu>(lowp_detail::bitsOf(f)))};
}
ACCL_HD fp8e5m2_t fp8e5m2FromFloatNoSat(float f) {
  return fp8e5m2_t{static_cast<uint8_t>(lowp_detail::narrow<5, 2, 15, 0x7bu, 0x7cu, 0x7fu>(lowp_detail::bitsOf(f)))};
}

// Classification and constants.
ACCL_HD bool isNan(half_t h) { return (h.bits & 0x7fffu) > 0x7c00u; }
ACCL_HD bool isNan(bf16_t b) { return (b.bits & 0x7fffu) > 0x7f80u; }
ACCL_HD bool isNan(fp8e4m3_t v) { return (v.bits & 0x7fu) == 0x7fu; }
ACCL_HD bool isNan(fp8e5m2_t v) { return (v.bits & 0x7fu) > 0x7cu; }
template <typename T> struct LowpTraits;
template <> struct LowpTraits<half_t> { static constexpr uint16_t kNaN = 0x7fff, kMax = 0x7bff; };
template <> struct LowpTraits<bf16_t> { static constexpr uint16_t kNaN = 0x7fff, kMax = 0x7f7f; };
template <> struct LowpTraits<fp8e4m3_t> { static constexpr uint8_t kNaN = 0x7f, kMax = 0x7e; };
template <> struct LowpTraits<fp8e5m2_t> { static constexpr uint8_t kNaN = 0x7f, kMax = 0x7b; };

// ---------------------------------------------------------------------------
// roundResult<T>(r): how NCCL stores an arithmetic result r (computed in
// float from T inputs) back into T. half/bf16: RNE to T. fp8: RNE to half
// first (NCCL computes fp8 in half), then RNE/satfinite to fp8.
template <typename T> ACCL_HD T roundResult(float r) { return fromFloat<T>(r); }
template <> ACCL_HD fp8e4m3_t roundResult<fp8e4m3_t>(float r) {
  return fromFloat<fp8e4m3_t>(toFloat(fromFloat<half_t>(r)));
}
template <> ACCL_HD fp8e5m2_t roundResult<fp8e5m2_t>(float r) {
  return fromFloat<fp8e5m2_t>(toFloat(fromFloat<half_t>(r)));
}

// The host executor's load/store pair: compute in float, store like NCCL.
template <typename T>
struct LowpArith {
  using A = float;
  ACCL_HD static float load(T x) { return toFloat(x); }
  ACCL_HD static T store(float a) { return roundResult<T>(a); }
};

// ---------------------------------------------------------------------------
// Operators. LowpOp<T, Op> applies reduce_ops.h's Op<float> to the decoded
// operands and stores the result as NCCL does (valid for OpSum, OpProd).
// Max/min are specialised to __hmax/__hmin semantics and select an operand's
// bits directly (see storeSelected for e5m2 infinities).
template <typename T, template <typename> class Op>
struct LowpOp {
  ACCL_HD T operator()(T a, T b) const { return roundResult<T>(Op<float>()(toFloat(a), toFloat(b))); }
};
// An unsigned key ordering non-NaN encodings by value, with -0 < +0.
template <typename T>
ACCL_HD uint32_t orderKey(T v) {
  constexpr uint32_t kSign = 1u << (8 * sizeof(T) - 1);
  const uint32_t u = v.bits;
  return u ^ ((u & kSign) ? (2 * kSign - 1) : kSign);
}
// What storing a selected operand (max/min) does: nothing, except that NCCL
// stores fp8 through the saturating conversion, so an e5m2 +-inf operand
// comes out as +-57344 (0x7b/0xfb), as on the GPU.
template <typename T> ACCL_HD T storeSelected(T v) { return v; }
template <> ACCL_HD fp8e5m2_t storeSelected<fp8e5m2_t>(fp8e5m2_t v) {
  return fp8e5m2_t{static_cast<uint8_t>(v.bits - ((v.bits & 0x7fu) == 0x7cu))};
}
template <typename T>
struct LowpOp<T, OpMax> {
  ACCL_HD T operator()(T a, T b) const {
    const bool na = isNan(a), nb = isNan(b);
    const T m = orderKey(a) >= orderKey(b) ? a : b;
    return storeSelected(nb ? (na ? T{LowpTraits<T>::kNaN} : a) : (na ? b : m));
  }
};
template <typename T>
struct LowpOp<T, OpMin> {
  ACCL_HD T operator()(T a, T b) const {
    const bool na = isNan(a), nb = isNan(b);
    const T m = orderKey(a) <= orderKey(b) ? a : b;
    return storeSelected(nb ? (na ? T{LowpTraits<T>::kNaN} : a) : (na ? b : m));
  }
};

// PreMulSum: each rank's own input is multiplied by the scalar and rounded to
// T (NCCL's preOp), then summed like OpSum. The scalar is a T; for ncclAvg
// NCCL uses avgScalar<T>(nRanks).
template <typename T>
struct LowpPreMulSum {
  float s;
  ACCL_HD explicit LowpPreMulSum(T scalar) : s(toFloat(scalar)) {}
  ACCL_HD T preOp(T x) const { return roundResult<T>(toFloat(x) * s); }
  // local * scalar + partial, with NCCL's two roundings
  ACCL_HD T operator()(T local, T partial) const { return LowpOp<T, OpSum>()(preOp(local), partial); }
};
// NCCL hostToDevRedOp: __float2half / __float2bfloat16 / __nv_cvt_float_to_fp8(SATFINITE) of float(1.0/n).
template <typename T> ACCL_HD T avgScalar(int nRanks) { return fromFloat<T>(static_cast<float>(1.0 / nRanks)); }

// reduce_ops.h's operators on the storage types, so code templated on
// Op<T> (host_reduce.cc, dev_prims.cuh) works unchanged for them.
#define ACCL_LOWP_OP_SPEC(OpT, T) \
  template <> struct OpT<T> : LowpOp<T, OpT> {};
#define ACCL_LOWP_OPS_FOR(T) \
  ACCL_LOWP_OP_SPEC(OpSum, T) ACCL_LOWP_OP_SPEC(OpProd, T) ACCL_LOWP_OP_SPEC(OpMax, T) ACCL_LOWP_OP_SPEC(OpMin, T)
ACCL_LOWP_OPS_FOR(half_t)
ACCL_LOWP_OPS_FOR(bf16_t)
ACCL_LOWP_OPS_FOR(fp8e4m3_t)
ACCL_LOWP_OPS_FOR(fp8e5m2_t)
#undef ACCL_LOWP_OPS_FOR
#undef ACCL_LOWP_OP_SPEC

// ---------------------------------------------------------------------------
// Bulk conversions (host executor hot path; plain loops).
template <typename T>
inline void toFloatN(const T* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = toFloat(src[i]);
}
template <typename T>
inline void fromFloatN(const float* src, T* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = fromFloat<T>(src[i]);
}
template <typename T>
inline void roundResultN(const float* src, T* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = roundResult<T>(src[i]);
}

}  // namespace accl
