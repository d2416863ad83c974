#include "core/types.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace perf {
namespace {

constexpr int64_t kBig = int64_t(1) << 53;  // beyond this doubles lose integers

const TypeInfo kTypes[ncclNumTypes] = {
    {ncclInt8, "int8", 1, false, true, 127, 6, 0},
    {ncclUint8, "uint8", 1, false, false, 255, 7, 0},
    {ncclInt32, "int32", 4, false, true, INT32_MAX, 30, 0},
    {ncclUint32, "uint32", 4, false, false, UINT32_MAX, 31, 0},
    {ncclInt64, "int64", 8, false, true, kBig, 62, 0},
    {ncclUint64, "uint64", 8, false, false, kBig, 63, 0},
    {ncclFloat16, "half", 2, true, true, 2048, 15, 1.0 / 1024},
    {ncclFloat32, "float", 4, true, true, int64_t(1) << 24, 30, 1.0 / (1 << 23)},
    {ncclFloat64, "double", 8, true, true, kBig, 30, 1.0 / kBig},
    {ncclBfloat16, "bfloat16", 2, true, true, 256, 30, 1.0 / 128},
    {ncclFloat8e4m3, "f8e4m3", 1, true, true, 16, 8, 1.0 / 8},
    {ncclFloat8e5m2, "f8e5m2", 1, true, true, 8, 15, 1.0 / 4},
};

struct Alias {
  const char* name;
  ncclDataType_t type;
};
const Alias kTypeAliases[] = {
    {"char", ncclInt8},       {"int", ncclInt32},          {"float16", ncclFloat16},
    {"fp16", ncclFloat16},    {"float32", ncclFloat32},    {"fp32", ncclFloat32},
    {"float64", ncclFloat64}, {"fp64", ncclFloat64},       {"bf16", ncclBfloat16},
    {"e4m3", ncclFloat8e4m3}, {"fp8e4m3", ncclFloat8e4m3}, {"float8e4m3", ncclFloat8e4m3},
    {"e5m2", ncclFloat8e5m2}, {"fp8e5m2", ncclFloat8e5m2}, {"float8e5m2", ncclFloat8e5m2},
};

const char* const kOpNames[] = {"sum", "prod", "max", "min", "avg", "mulsum", "none"};

// A small binary float: expBits exponent bits, manBits mantissa bits, IEEE
// layout. fnuz-style e4m3 ("fn": no infinities, only S.1111.111 is NaN).
struct MiniFloat {
  int expBits, manBits;
  bool hasInf;
};
constexpr MiniFloat kHalf{5, 10, true}, kBf16{8, 7, true}, kE4m3{4, 3, false}, kE5m2{5, 2, true};

uint32_t encodeMini(const MiniFloat& f, double v) {
  const int bias = (1 << (f.expBits - 1)) - 1;
  const uint32_t signBit = 1u << (f.expBits + f.manBits);
  const uint32_t expAll = (1u << f.expBits) - 1;
  const uint32_t nanBits = f.hasInf ? (expAll << f.manBits) | (1u << (f.manBits - 1))
                                    : (expAll << f.manBits) | ((1u << f.manBits) - 1);
  if (std::isnan(v)) return nanBits;
  uint32_t sign = std::signbit(v) ? signBit : 0;
  double a = std::fabs(v);
  if (a == 0) return sign;
  int e;
  (void)std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  int unbiased = e - 1;
  uint32_t bits;
  if (unbiased + bias >= 1) {
    double man = std::nearbyint((std::ldexp(a, -unbiased) - 1.0) * (1 << f.manBits));
    bits = (uint32_t(unbiased + bias) << f.manBits) + uint32_t(man);  // a carry bumps the exponent
  } else {
    double man = std::nearbyint(std::ldexp(a, bias - 1 + f.manBits));
    bits = uint32_t(man);  // subnormal; rounding up to 2^manBits gives the smallest normal
  }
  const uint32_t maxFinite = f.hasInf ? (expAll << f.manBits) - 1 : nanBits - 1;
  if (bits > maxFinite) bits = f.hasInf ? (expAll << f.manBits) : maxFinite;
  return sign | bits;
}

double decodeMini(const MiniFloat& f, uint32_t bits) {
  const int bias = (1 << (f.expBits - 1)) - 1;
  const uint32_t expAll = (1u << f.expBits) - 1;
  bool negative = (bits >> (f.expBits + f.manBits)) & 1;
  uint32_t ex = (bits >> f.manBits) & expAll;
  uint32_t man = bits & ((1u << f.manBits) - 1);
  double v;
  if (ex == expAll && f.hasInf) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (ex == expAll && man == (1u << f.manBits) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (ex == 0) {
    v = std::ldexp(double(man), 1 - bias - f.manBits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(double(man), -f.manBits), int(ex) - bias);
  }
  return negative ? -v : v;
}

template <typename T>
T toInt(double v) {
  if (std::isnan(v)) return 0;
  double lo = double(std::numeric_limits<T>::min()), hi = double(std::numeric_limits<T>::max());
  if (v <= lo) return std::numeric_limits<T>::min();
  if (v >= hi) return std::numeric_limits<T>::max();
  return T(std::nearbyint(v));
}

template <typename T>
void put(void* base, size_t index, T v) {
  std::memcpy(static_cast<char*>(base) + index * sizeof(T), &v, sizeof(T));
}
template <typename T>
T get(const void* base, size_t index) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + index * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

const TypeInfo& typeInfo(ncclDataType_t type) { return kTypes[int(type)]; }

const std::vector<ncclDataType_t>& allTypes() {
  static const std::vector<ncclDataType_t> all = [] {
    std::vector<ncclDataType_t> v;
    for (const TypeInfo& t : kTypes) v.push_back(t.type);
    return v;
  }();
  return all;
}

bool parseType(const std::string& text, ncclDataType_t* out) {
  for (const TypeInfo& t : kTypes) {
    if (text == t.name) return *out = t.type, true;
  }
  for (const Alias& a : kTypeAliases) {
    if (text == a.name) return *out = a.type, true;
  }
  return false;
}

const char* opName(Op op) { return kOpNames[int(op)]; }

const std::vector<Op>& allOps() {
  static const std::vector<Op> all = {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg, Op::MulSum};
  return all;
}

bool parseOp(const std::string& text, Op* out) {
  for (Op op : allOps()) {
    if (text == opName(op)) return *out = op, true;
  }
  if (text == "premulsum") return *out = Op::MulSum, true;
  return false;
}

ncclRedOp_t builtinOp(Op op) {
  switch (op) {
    case Op::Sum: return ncclSum;
    case Op::Prod: return ncclProd;
    case Op::Max: return ncclMax;
    case Op::Min: return ncclMin;
    case Op::Avg: return ncclAvg;
    default: return ncclSum;  // None (unused by the call) and MulSum (created per call)
  }
}

void storeValue(ncclDataType_t type, void* base, size_t index, double value) {
  switch (type) {
    case ncclInt8: put(base, index, toInt<int8_t>(value)); break;
    case ncclUint8: put(base, index, toInt<uint8_t>(value)); break;
    case ncclInt32: put(base, index, toInt<int32_t>(value)); break;
    case ncclUint32: put(base, index, toInt<uint32_t>(value)); break;
    case ncclInt64: put(base, index, toInt<int64_t>(value)); break;
    case ncclUint64: put(base, index, toInt<uint64_t>(value)); break;
    case ncclFloat16: put(base, index, uint16_t(encodeMini(kHalf, value))); break;
    case ncclFloat32: put(base, index, float(value)); break;
    case ncclFloat64: put(base, index, value); break;
    case ncclBfloat16: put(base, index, uint16_t(encodeMini(kBf16, value))); break;
    case ncclFloat8e4m3: put(base, index, uint8_t(encodeMini(kE4m3, value))); break;
    case ncclFloat8e5m2: put(base, index, uint8_t(encodeMini(kE5m2, value))); break;
    default: break;
  }
}

double loadValue(ncclDataType_t type, const void* base, size_t index) {
  switch (type) {
    case ncclInt8: return get<int8_t>(base, index);
    case ncclUint8: return get<uint8_t>(base, index);
    case ncclInt32: return get<int32_t>(base, index);
    case ncclUint32: return get<uint32_t>(base, index);
    case ncclInt64: return double(get<int64_t>(base, index));
    case ncclUint64: return double(get<uint64_t>(base, index));
    case ncclFloat16: return decodeMini(kHalf, get<uint16_t>(base, index));
    case ncclFloat32: return get<float>(base, index);
    case ncclFloat64: return get<double>(base, index);
    case ncclBfloat16: return decodeMini(kBf16, get<uint16_t>(base, index));
    case ncclFloat8e4m3: return decodeMini(kE4m3, get<uint8_t>(base, index));
    case ncclFloat8e5m2: return decodeMini(kE5m2, get<uint8_t>(base, index));
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

}  // namespace perf
