#include "device/lowp_scalar.h"

#include <cmath>
#include <cstring>

#include "device/lowp.h"

namespace accl {
namespace {

template <typename T>
double load(const void* p) {
  T v;
  memcpy(&v, p, sizeof(v));
  return toFloat(v);  // exact: every value of these formats is a float
}

}  // namespace

double lowpScalarToDouble(ncclDataType_t type, const void* p) {
  switch (type) {
    case ncclFloat16: return load<half_t>(p);
    case ncclBfloat16: return load<bf16_t>(p);
    case ncclFloat8e4m3: return load<fp8e4m3_t>(p);
    case ncclFloat8e5m2: return load<fp8e5m2_t>(p);
    default: return NAN;
  }
}

}  // namespace accl
