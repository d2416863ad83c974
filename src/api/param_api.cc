// NCCL 2.30's parameter API over ACCL's one table of parameters
// (base/params.def): every ACCL and NCCL name ACCL reads, with the value the
// library runs with (environment, then NCCL_CONF_FILE or ~/.nccl.conf, then
// /etc/nccl.conf, then the default; read once, again after
// ncclResetDebugInit). Integer parameters are 64-bit; a typed read converts
// when the value fits the type asked for. Strings handed out stay valid for
// the process's life (NCCL promises only until the thread's next call): each
// distinct value is kept once, and values change only when re-read.
#include "api/api.h"

#include <cstdio>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "base/check.h"
#include "base/fork_safe.h"
#include "base/param.h"

// The handle NCCL leaves opaque: which parameter. One per parameter, never
// freed (trivially destructible, so valid through static destruction too).
struct ncclParamHandle {
  int index;
};

namespace {

constexpr int kParams = static_cast<int>(accl::Param::Count);

std::mutex& internLock() {
  static std::mutex* mu = new std::mutex();  // never destroyed: calls may come during exit
  return *mu;
}
const accl::HeldAcrossFork<internLock> internFreeAtFork;  // a leaf: nothing else is taken under it

// `text`, kept for the process's life; the same text gives the same pointer.
const char* interned(const std::string& text) {
  static std::set<std::string>* kept = new std::set<std::string>();
  std::lock_guard<std::mutex> lock(internLock());
  return kept->insert(text).first->c_str();
}

ncclParamHandle* handles() {
  static ncclParamHandle all[kParams];
  static const bool filled = [] {
    for (int i = 0; i < kParams; ++i) all[i].index = i;
    return true;
  }();
  (void)filled;
  return all;
}

// The parameter a handle names; a pointer that no ncclParamBind returned is refused.
ncclResult_t indexOf(const char* fn, ncclParamHandle_t h, int* index) {
  const auto first = reinterpret_cast<uintptr_t>(handles());
  const auto p = reinterpret_cast<uintptr_t>(h);
  if (h == nullptr || p < first || p >= first + sizeof(ncclParamHandle) * kParams ||
      (p - first) % sizeof(ncclParamHandle) != 0) {
    WARN("%s: %p is not a handle from ncclParamBind", fn, static_cast<void*>(h));
    return ncclInvalidArgument;
  }
  *index = h->index;
  return ncclSuccess;
}

ncclResult_t notNull(const char* fn, const void* p, const char* what) {
  if (p) return ncclSuccess;
  WARN("%s: %s is NULL", fn, what);
  return ncclInvalidArgument;
}

// The parameter named `key`, which must be one.
ncclResult_t lookup(const char* fn, const char* key, int* index) {
  NCCLCHECK(notNull(fn, key, "key"));
  *index = accl::paramIndex(key);
  if (*index >= 0) return ncclSuccess;
  WARN("%s: no parameter is named \"%s\" (names are case-sensitive; ncclParamGetAllParameterKeys lists them)", fn,
       key);
  return ncclInvalidArgument;
}

template <typename T>
const char* typeName() {
  if (std::is_same<T, int8_t>::value) return "int8";
  if (std::is_same<T, int16_t>::value) return "int16";
  if (std::is_same<T, int32_t>::value) return "int32";
  if (std::is_same<T, int64_t>::value) return "int64";
  if (std::is_same<T, uint8_t>::value) return "uint8";
  if (std::is_same<T, uint16_t>::value) return "uint16";
  if (std::is_same<T, uint32_t>::value) return "uint32";
  return "uint64";
}

template <typename T>
bool fits(int64_t v) {
  if (std::is_signed<T>::value)
    return v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
           v <= static_cast<int64_t>(std::numeric_limits<T>::max());
  return v >= 0 && static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
}

// ncclParamGetI8 ... GetU64: the integer parameter's value, if it fits T.
template <typename T>
ncclResult_t getTyped(const char* fn, ncclParamHandle_t h, T* out) {
  ACCL_API_GUARD_BEGIN
  int i = 0;
  NCCLCHECK(indexOf(fn, h, &i));
  NCCLCHECK(notNull(fn, out, "out"));
  const accl::ParamValue v = accl::paramValue(i);
  if (!v.isInt) {
    WARN("%s: %s is a string parameter (\"%s\"); read it with ncclParamGetStr", fn, accl::paramName(i),
         v.text.c_str());
    return ncclInvalidArgument;
  }
  if (!fits<T>(v.ival)) {
    WARN("%s: %s is %lld, which does not fit in %s; read it with ncclParamGetI64", fn, accl::paramName(i),
         static_cast<long long>(v.ival), typeName<T>());
    return ncclInvalidArgument;
  }
  *out = static_cast<T>(v.ival);
  return ncclSuccess;
  ACCL_API_GUARD_END(fn)
}

}  // namespace

extern "C" ncclResult_t pncclParamBind(ncclParamHandle_t* out, const char* key) {
  NCCLCHECK(notNull("ncclParamBind", out, "out"));
  int i = 0;
  NCCLCHECK(lookup("ncclParamBind", key, &i));
  *out = &handles()[i];
  return ncclSuccess;
}
NCCL_API_ALIAS(ncclParamBind)

#define ACCL_PARAM_GET_TYPED(Name, T)                                                               \
  extern "C" ncclResult_t pncclParamGet##Name(ncclParamHandle_t h, T* out) {                        \
    return getTyped("ncclParamGet" #Name, h, out);                                                  \
  }                                                                                                 \
  NCCL_API_ALIAS(ncclParamGet##Name)
ACCL_PARAM_GET_TYPED(I8, int8_t)
ACCL_PARAM_GET_TYPED(I16, int16_t)
ACCL_PARAM_GET_TYPED(I32, int32_t)
ACCL_PARAM_GET_TYPED(I64, int64_t)
ACCL_PARAM_GET_TYPED(U8, uint8_t)
ACCL_PARAM_GET_TYPED(U16, uint16_t)
ACCL_PARAM_GET_TYPED(U32, uint32_t)
ACCL_PARAM_GET_TYPED(U64, uint64_t)
#undef ACCL_PARAM_GET_TYPED

extern "C" ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char** out) {
  ACCL_API_GUARD_BEGIN
  int i = 0;
  NCCLCHECK(indexOf("ncclParamGetStr", h, &i));
  NCCLCHECK(notNull("ncclParamGetStr", out, "out"));
  *out = interned(accl::paramValue(i).text);
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclParamGetStr")
}
NCCL_API_ALIAS(ncclParamGetStr)

// The value's bytes: an int64 for an integer parameter, the text and its NUL
// for a string. Too small a buffer fails and *len says how much is needed.
extern "C" ncclResult_t pncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  ACCL_API_GUARD_BEGIN
  int i = 0;
  NCCLCHECK(indexOf("ncclParamGet", h, &i));
  NCCLCHECK(notNull("ncclParamGet", out, "out"));
  NCCLCHECK(notNull("ncclParamGet", len, "len"));
  if (maxLen <= 0) {
    WARN("ncclParamGet: maxLen is %d", maxLen);
    return ncclInvalidArgument;
  }
  const accl::ParamValue v = accl::paramValue(i);
  const void* bytes = v.isInt ? static_cast<const void*>(&v.ival) : v.text.c_str();
  const size_t size = v.isInt ? sizeof(v.ival) : v.text.size() + 1;
  if (size > static_cast<size_t>(maxLen)) {
    WARN("ncclParamGet: %s takes %zu bytes, more than maxLen %d", accl::paramName(i), size, maxLen);
    *len = static_cast<int>(size);
    return ncclInvalidArgument;
  }
  memcpy(out, bytes, size);
  *len = static_cast<int>(size);
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclParamGet")
}
NCCL_API_ALIAS(ncclParamGet)

extern "C" ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  ACCL_API_GUARD_BEGIN
  NCCLCHECK(notNull("ncclParamGetParameter", value, "value"));
  NCCLCHECK(notNull("ncclParamGetParameter", valueLen, "valueLen"));
  int i = 0;
  if (const ncclResult_t r = lookup("ncclParamGetParameter", key, &i); r != ncclSuccess) {
    *value = nullptr;  // as NCCL's: no value, length 0
    *valueLen = 0;
    return r;
  }
  const std::string text = accl::paramValue(i).text;
  *value = interned(text);
  *valueLen = static_cast<int>(text.size());
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclParamGetParameter")
}
NCCL_API_ALIAS(ncclParamGetParameter)

extern "C" ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  ACCL_API_GUARD_BEGIN
  NCCLCHECK(notNull("ncclParamGetAllParameterKeys", table, "table"));
  NCCLCHECK(notNull("ncclParamGetAllParameterKeys", tableLen, "tableLen"));
  static const std::vector<const char*>* const keys = [] {  // the names are literals: one table for good
    auto* k = new std::vector<const char*>();
    for (int i = 0; i < accl::paramCount(); ++i) k->push_back(accl::paramName(i));
    return k;
  }();
  *table = const_cast<const char**>(keys->data());
  *tableLen = static_cast<int>(keys->size());
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclParamGetAllParameterKeys")
}
NCCL_API_ALIAS(ncclParamGetAllParameterKeys)

// To stdout, as NCCL's does: every parameter, its value, where the value came from.
extern "C" void pncclParamDumpAll(void) {
  try {
    const std::string all = accl::dumpParams();
    printf("=== ACCL parameters (NAME=value (source)  # meaning) ===\n%s", all.c_str());
    fflush(stdout);
  } catch (const std::exception& e) {
    WARN("ncclParamDumpAll: internal error: %s", e.what());
  }
}
NCCL_API_ALIAS(ncclParamDumpAll)
