// Error plumbing. Internally every fallible function returns ncclResult_t; the
// check macros log "file:line -> code" at each level an error passes through
// (a poor man's backtrace, visible with NCCL_DEBUG=INFO).
#pragma once

#include "base/debug.h"
#include "nccl.h"

#define NCCLCHECK(call)                                                             \
  do {                                                                              \
    ncclResult_t res_ = (call);                                                     \
    if (res_ != ncclSuccess && res_ != ncclInProgress) {                            \
      INFO(::accl::kAll, "%s:%d -> %d", __FILE__, __LINE__, static_cast<int>(res_)); \
      return res_;                                                                  \
    }                                                                               \
  } while (0)

// Jumps to `label` with `res` set, for functions that must clean up by hand.
#define NCCLCHECKGOTO(call, res, label)                                            \
  do {                                                                             \
    (res) = (call);                                                                \
    if ((res) != ncclSuccess && (res) != ncclInProgress) {                         \
      INFO(::accl::kAll, "%s:%d -> %d", __FILE__, __LINE__, static_cast<int>(res)); \
      goto label;                                                                  \
    }                                                                              \
  } while (0)
