// Included first by every file of the C boundary: the public declarations get
// default visibility (the library is built with -fvisibility=hidden), and
// NCCL_API_ALIAS makes the nccl* name a weak alias of the strong pnccl* one, so
// a profiler can interpose on either.
#pragma once

#pragma GCC visibility push(default)
#include "api/device_api_abi.h"
#include "base/debug.h"
#include "accl.h"
#include "nccl.h"
#pragma GCC visibility pop

#define ACCL_PRAGMA(x) _Pragma(#x)
#define NCCL_API_ALIAS(name) ACCL_PRAGMA(weak name = p##name)

// No C++ exception may cross extern "C": each entry point's body runs inside this.
#define ACCL_API_GUARD_BEGIN try {
#define ACCL_API_GUARD_END(fn)                                    \
  }                                                               \
  catch (const std::exception& e) {                               \
    WARN("%s: internal error: %s", fn, e.what());                 \
    return ncclInternalError;                                     \
  }                                                               \
  catch (...) {                                                   \
    WARN("%s: internal error: unknown exception", fn);            \
    return ncclInternalError;                                     \
  }
