// Reading one low-precision element (float16, bfloat16, fp8) as a double:
// for PreMulSum scalars given in those types.
#pragma once

#include "nccl.h"

namespace accl {

double lowpScalarToDouble(ncclDataType_t type, const void* p);

}  // namespace accl
