// Version, error strings, last error, debug reset, groups, and the accl* extensions.
#include "api/api.h"

#include <cstdio>
#include <cstring>

#include "base/check.h"
#include "base/errors.h"
#include "base/param.h"
#include "base/version.h"
#include "coll/dev_comm.h"
#include "core/mode.h"
#include "init/group.h"
#include "transport/host_share.h"

extern "C" ncclResult_t pncclGetVersion(int* version) {
  if (!version) {
    WARN("ncclGetVersion: version is NULL");
    return ncclInvalidArgument;
  }
  *version = NCCL_VERSION_CODE;  // the NCCL API level we implement; acclGetVersionString for ours
  return ncclSuccess;
}
NCCL_API_ALIAS(ncclGetVersion)

extern "C" const char* pncclGetErrorString(ncclResult_t result) { return accl::errorString(result); }
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

extern "C" const char* acclGetVersionString(void) { return accl::versionString(); }

extern "C" const char* acclGetThreadLastError(void) { return accl::threadLastWarning(); }

extern "C" int acclQueryMode(char* reason, size_t len) {
  const accl::ModeInfo& m = accl::queryMode();
  if (reason && len > 0) snprintf(reason, len, "%s", m.reason.c_str());
  return m.device ? 1 : 0;
}
