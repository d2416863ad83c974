// Version, error strings, last error, debug reset, groups, and the accl* extensions.
#include "api/api.h"

#include <cstdio>
#include <cstring>

#include "core/check.h"
#include "core/group.h"
#include "core/mode.h"
#include "core/param.h"
#include "device/dev_comm.h"
#include "transport/host_share.h"

#define ACCL_STR2(x) #x
#define ACCL_STR(x) ACCL_STR2(x)

extern "C" ncclResult_t pncclGetVersion(int* version) {
  if (!version) {
    WARN("ncclGetVersion: version is NULL");
    return ncclInvalidArgument;
  }
  *version = NCCL_VERSION_CODE;  // the NCCL API level we implement; acclGetVersionString for ours
  return ncclSuccess;
}
NCCL_API_ALIAS(ncclGetVersion)

extern "C" const char* pncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error (run with NCCL_DEBUG=INFO for details)";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "operation timed out (ACCL_TIMEOUT)";
    default: return "unknown result code";
  }
}
NCCL_API_ALIAS(ncclGetErrorString)

extern "C" const char* pncclGetLastError(ncclComm_t /*comm: the last warning is per process*/) {
  return accl::lastWarning();
}
NCCL_API_ALIAS(ncclGetLastError)

extern "C" void pncclResetDebugInit(void) {
  accl::resetParams();
  accl::resetLogInit();
}
NCCL_API_ALIAS(ncclResetDebugInit)

extern "C" void ncclResetDebugInitInternal(void) { pncclResetDebugInit(); }

extern "C" ncclResult_t pncclGroupStart(void) { return accl::groupStart(); }
NCCL_API_ALIAS(ncclGroupStart)

extern "C" ncclResult_t pncclGroupEnd(void) {
  ACCL_API_GUARD_BEGIN
  return accl::groupEnd();
  ACCL_API_GUARD_END("ncclGroupEnd")
}
NCCL_API_ALIAS(ncclGroupEnd)

extern "C" ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  if (!ptr) {
    WARN("ncclMemAlloc: ptr is NULL");
    return ncclInvalidArgument;
  }
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  // Device mode: device memory, as NCCL. Host mode: page-aligned host memory
  // that other processes on the host can map (transport/host_share.h), so
  // that collectives on symmetric windows run direct between processes.
  if (accl::queryMode().device) return accl::devMemAlloc(ptr, size);
  return accl::hostShareAlloc(ptr, size);
}
NCCL_API_ALIAS(ncclMemAlloc)

extern "C" ncclResult_t pncclMemFree(void* ptr) {
  if (!ptr) return ncclSuccess;
  if (accl::queryMode().device && accl::devMemFree(ptr)) return ncclSuccess;
  if (accl::hostShareFree(ptr)) return ncclSuccess;
  free(ptr);
  return ncclSuccess;
}
NCCL_API_ALIAS(ncclMemFree)

extern "C" const char* acclGetVersionString(void) {
  return ACCL_STR(ACCL_VERSION_MAJOR) "." ACCL_STR(ACCL_VERSION_MINOR) "." ACCL_STR(ACCL_VERSION_PATCH);
}

extern "C" const char* acclGetThreadLastError(void) { return accl::threadLastWarning(); }

extern "C" int acclQueryMode(char* reason, size_t len) {
  const accl::ModeInfo& m = accl::queryMode();
  if (reason && len > 0) snprintf(reason, len, "%s", m.reason.c_str());
  return m.device ? 1 : 0;
}
