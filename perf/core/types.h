// Datatypes and reduction operators as the drivers see them: names (as
// nccl-tests prints and parses them), element sizes, how far small integers
// stay exact in each type, and conversion between a type's bytes and double.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

namespace perf {

struct TypeInfo {
  ncclDataType_t type;
  const char* name;      // nccl-tests' name: int8 .. f8e5m2
  size_t size;           // bytes per element
  bool isFloat;
  bool isSigned;
  int64_t exactMax;      // every integer in [-exactMax, exactMax] (or [0, ..] unsigned) is exact
  int maxPow2;           // 2^maxPow2 is representable (products of 2s stay exact up to it)
  double epsilon;        // unit roundoff of a float type (0 for integers)
};

// The operators the drivers run. PreMulSum ("mulsum") is built per call with
// ncclRedOpCreatePreMulSum; kNone marks collectives that take no operator.
enum class Op { Sum, Prod, Max, Min, Avg, MulSum, None };

const TypeInfo& typeInfo(ncclDataType_t type);
const std::vector<ncclDataType_t>& allTypes();  // the 12 types, in enum order
bool parseType(const std::string& text, ncclDataType_t* out);  // a name or an alias

const char* opName(Op op);
const std::vector<Op>& allOps();  // sum prod max min avg mulsum
bool parseOp(const std::string& text, Op* out);
// The ncclRedOp_t for the built-in operators (not MulSum or None).
ncclRedOp_t builtinOp(Op op);

// Element <-> double. store() rounds to nearest (even) and saturates integers;
// the patterns only use values that are exact in the target type.
void storeValue(ncclDataType_t type, void* base, size_t index, double value);
double loadValue(ncclDataType_t type, const void* base, size_t index);

}  // namespace perf
