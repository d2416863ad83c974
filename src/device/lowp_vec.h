// The low-precision conversions of device/lowp.h, written without branches so
// that the compiler vectorises the host executor's loops over them (lowp.h's
// early returns kept every float16 and fp8 reduction scalar: 0.5-2 GB/s, where
// float32 runs at 20-100). Host only; the CUDA kernels keep lowp.h's forms.
//
// Every function gives the bits of its lowp.h counterpart for every input
// (the unit test lowp_vec_matches_lowp checks them), under any rounding
// mode and FTZ/DAZ: the only floating-point operations are exact ones (a
// product by a power of two, a small integer's conversion, the difference of
// a value and its truncation, a truncating conversion).
#pragma once

#include <cstdint>

#include "device/lowp.h"

namespace accl {
namespace lowp_vec {

using lowp_detail::bitsOf;
using lowp_detail::floatOf;

// Always inlined: host_kernels.cc compiles its kernels three times over, and
// past GCC's growth limits for the unit it stopped inlining these calls, which
// left the loops unvectorised (and fp8 sums 5x slower than their scalar forms).
#define ACCL_VEC_INLINE inline __attribute__((always_inline))

// c ? a : b as a mask, so that the compiler sees no branch to keep.
ACCL_VEC_INLINE uint32_t pick(bool c, uint32_t a, uint32_t b) { return b ^ ((a ^ b) & (0u - uint32_t(c))); }

// half -> float. Subnormal halves: their integer mantissa times 2^-24.
ACCL_VEC_INLINE float toFloat(half_t h) {
  const uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  const uint32_t em = h.bits & 0x7fffu, exp = em & 0x7c00u;
  const uint32_t o = (em << 13) + (uint32_t(127 - 15) << 23);
  const uint32_t sub = bitsOf(static_cast<float>(static_cast<int32_t>(em)) * floatOf(103u << 23));
  return floatOf(sign | pick(exp == 0x7c00u, o + (uint32_t(128 - 16) << 23), pick(exp == 0, sub, o)));
}
ACCL_VEC_INLINE float toFloat(bf16_t b) { return floatOf(uint32_t(b.bits) << 16); }
ACCL_VEC_INLINE float toFloat(fp8e5m2_t v) { return lowp_vec::toFloat(half_t{static_cast<uint16_t>(v.bits << 8)}); }
ACCL_VEC_INLINE float toFloat(fp8e4m3_t v) {
  const uint32_t sign = uint32_t(v.bits & 0x80u) << 24;
  const uint32_t em = v.bits & 0x7fu;
  const uint32_t o = (em << 20) + (uint32_t(127 - 7) << 23);
  const uint32_t sub = bitsOf(static_cast<float>(static_cast<int32_t>(em)) * floatOf(118u << 23));  // m * 2^-9
  return floatOf(sign | pick(em == 0x7fu, 0x7fc00000u, pick((em & 0x78u) == 0, sub, o)));
}

// lowp.h's narrow(): float32 bits -> E exponent and M mantissa bits, round to
// nearest even; above MAXFIN gives OVF, NaN gives NANENC. A result that is
// subnormal in the target is |x| in units of the target's smallest subnormal
// (an exact product, below 2^M), rounded by hand from its truncation.
template <int E, int M, int BIAS, uint32_t MAXFIN, uint32_t OVF, uint32_t NANENC>
ACCL_VEC_INLINE uint32_t narrow(uint32_t x) {
  constexpr uint32_t kNormalMin = uint32_t(128 - BIAS) << 23;  // the target's smallest normal, as float bits
  const uint32_t sign = (x >> 31) << (E + M);
  const uint32_t ax = x & 0x7fffffffu;
  uint32_t normal = ax - (uint32_t(127 - BIAS) << 23);  // rebias; wraps where ax is subnormal (not used then)
  normal = (normal + ((1u << (22 - M)) - 1u) + ((normal >> (23 - M)) & 1u)) >> (23 - M);
  const float units = floatOf(pick(ax < kNormalMin, ax, 0)) * floatOf(uint32_t(127 + BIAS - 1 + M) << 23);
  const int32_t q = static_cast<int32_t>(units);
  const float frac = units - static_cast<float>(q);
  // (ints from the comparisons, not bools: GCC vectorises no mix of bool and int)
  const int32_t up = frac > 0.5f ? 1 : 0, tie = frac == 0.5f ? 1 : 0;
  const uint32_t sub = static_cast<uint32_t>(q + (up | (tie & q & 1)));
  uint32_t r = pick(ax < kNormalMin, sub, normal);
  r = pick(r > MAXFIN, OVF, r);
  return pick(ax > 0x7f800000u, NANENC, sign | r);
}

template <typename T> T fromFloat(float f);
template <> ACCL_VEC_INLINE half_t fromFloat<half_t>(float f) {
  return half_t{static_cast<uint16_t>(narrow<5, 10, 15, 0x7bffu, 0x7c00u, 0x7fffu>(bitsOf(f)))};
}
template <> ACCL_VEC_INLINE bf16_t fromFloat<bf16_t>(float f) {
  const uint32_t x = bitsOf(f);
  return bf16_t{static_cast<uint16_t>(pick((x & 0x7fffffffu) > 0x7f800000u, 0x7fffu, (x + 0x7fffu + ((x >> 16) & 1u)) >> 16))};
}
template <> ACCL_VEC_INLINE fp8e4m3_t fromFloat<fp8e4m3_t>(float f) {
  return fp8e4m3_t{static_cast<uint8_t>(narrow<4, 3, 7, 0x7eu, 0x7eu, 0x7fu>(bitsOf(f)))};
}
template <> ACCL_VEC_INLINE fp8e5m2_t fromFloat<fp8e5m2_t>(float f) {
  return fp8e5m2_t{static_cast<uint8_t>(narrow<5, 2, 15, 0x7bu, 0x7bu, 0x7fu>(bitsOf(f)))};
}

// lowp.h's roundResult(): how NCCL stores a float result (fp8 through half).
template <typename T> ACCL_VEC_INLINE T roundResult(float r) { return fromFloat<T>(r); }
template <> ACCL_VEC_INLINE fp8e4m3_t roundResult<fp8e4m3_t>(float r) { return fromFloat<fp8e4m3_t>(lowp_vec::toFloat(fromFloat<half_t>(r))); }
template <> ACCL_VEC_INLINE fp8e5m2_t roundResult<fp8e5m2_t>(float r) { return fromFloat<fp8e5m2_t>(lowp_vec::toFloat(fromFloat<half_t>(r))); }

// lowp.h's LowpOp<T, OpMax> (Max) or LowpOp<T, OpMin> for float16 and
// bfloat16: one operand's bits, ordered by orderKey (-0 < +0); a NaN operand
// is ignored, and two give the canonical NaN.
template <typename T, bool Max>
ACCL_VEC_INLINE uint16_t selectBits(uint16_t a, uint16_t b) {
  constexpr uint32_t kInf = LowpTraits<T>::kMax + 1u;  // the infinity: above it, NaN
  const uint32_t ua = a, ub = b;
  const uint32_t ka = ua ^ (0x8000u | ((0u - (ua >> 15)) & 0x7fffu));
  const uint32_t kb = ub ^ (0x8000u | ((0u - (ub >> 15)) & 0x7fffu));
  const bool na = (ua & 0x7fffu) > kInf, nb = (ub & 0x7fffu) > kInf;
  const uint32_t m = pick(Max ? ka >= kb : ka <= kb, ua, ub);
  return static_cast<uint16_t>(pick(nb, pick(na, LowpTraits<T>::kNaN, ua), pick(na, ub, m)));
}

}  // namespace lowp_vec
}  // namespace accl
