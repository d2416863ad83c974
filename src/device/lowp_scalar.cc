#include "device/lowp_scalar.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace accl {
namespace {

// Decodes a small IEEE-like binary format (sign, `ebits` exponent, `mbits`
// mantissa). Every value of these formats is exact in a double.
double decode(uint32_t bits, int ebits, int mbits, bool hasInf) {
  const uint32_t sign = bits >> (ebits + mbits), exp = (bits >> mbits) & ((1u << ebits) - 1);
  const uint32_t man = bits & ((1u << mbits) - 1);
  const int bias = (1 << (ebits - 1)) - 1;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - bias - mbits);
  } else if (exp == (1u << ebits) - 1 && (hasInf || man == (1u << mbits) - 1)) {
    v = (hasInf && man == 0) ? INFINITY : NAN;  // e4m3fn: only S.1111.111 is NaN
  } else {
    v = std::ldexp(static_cast<double>(man | (1u << mbits)), static_cast<int>(exp) - bias - mbits);
  }
  return sign ? -v : v;
}

}  // namespace

double lowpScalarToDouble(ncclDataType_t type, const void* p) {
  uint16_t h = 0;
  uint8_t b = 0;
  switch (type) {
    case ncclFloat16: memcpy(&h, p, 2); return decode(h, 5, 10, true);
    case ncclBfloat16: memcpy(&h, p, 2); return decode(h, 8, 7, true);
    case ncclFloat8e4m3: memcpy(&b, p, 1); return decode(b, 4, 3, false);
    case ncclFloat8e5m2: memcpy(&b, p, 1); return decode(b, 5, 2, true);
    default: return NAN;
  }
}

}  // namespace accl
