// Type-erased reductions for the host executor: one function pointer per
// (datatype, op), looked up once per collective.
#pragma once

#include <cstddef>

#include "nccl.h"

namespace accl {

// dst[i] = op(a[i], b[i]) for i < count; dst may alias a or b.
using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);

// NULL when the pair is not supported by the host executor.
ReduceFn hostReduceFn(ncclDataType_t type, ncclRedOp_t op);
size_t typeSize(ncclDataType_t type);  // 0 for an invalid type
const char* typeName(ncclDataType_t type);
const char* opName(ncclRedOp_t op);

}  // namespace accl
