#include "device/host_reduce.h"

#include <cstdint>

#include "device/reduce_ops.h"

namespace accl {
namespace {

template <typename T, template <typename> class Op>
void reduceLoop(void* dst, const void* a, const void* b, size_t count) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  Op<T> op;
  // A plain loop: the compiler vectorises it (no aliasing assumptions needed
  // beyond element-wise access, which is safe for dst == a or dst == b).
  for (size_t i = 0; i < count; ++i) d[i] = op(x[i], y[i]);
}

}  // namespace

ReduceFn hostReduceFn(ncclDataType_t type, ncclRedOp_t op) {
#define ACCL_OP_CASE(opEnum, OpT) \
  case opEnum: return &reduceLoop<CT, OpT>;
#define ACCL_TYPE_CASE(typeEnum, ctype)  \
  case typeEnum: {                       \
    using CT = ctype;                    \
    switch (op) {                        \
      ACCL_BASIC_OPS(ACCL_OP_CASE)       \
      default: return nullptr;           \
    }                                    \
  }
  switch (type) {
    ACCL_NATIVE_TYPES(ACCL_TYPE_CASE)
    default: return nullptr;
  }
#undef ACCL_TYPE_CASE
#undef ACCL_OP_CASE
}

size_t typeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

const char* typeName(ncclDataType_t type) {
  static const char* const kNames[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                       "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  int t = static_cast<int>(type);
  return t >= 0 && t < 12 ? kNames[t] : "invalid";
}

const char* opName(ncclRedOp_t op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg"};
  int o = static_cast<int>(op);
  return o >= 0 && o < 5 ? kNames[o] : "custom";
}

}  // namespace accl
