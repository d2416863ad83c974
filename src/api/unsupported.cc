// Every NCCL 2.30 function ACCL does not implement yet. Each one fails loudly:
// a WARN naming the function and ncclInvalidUsage (functions that cannot return
// an ncclResult_t return an empty team / -1). docs/api-status.md lists them.
// Generated once from include/nccl.h and src/api/device_api_abi.h; as functions
// are implemented they move to their own files.
#include "api/api.h"

#include "base/check.h"
#include "base/version.h"

#define ACCL_UNSUPPORTED(name) WARN("%s is not supported by ACCL %s yet (see docs/api-status.md)", #name, accl::versionString())

// --- the device API (GPU-initiated communication) ---
extern "C" ncclResult_t pncclDevCommCreate(ncclComm_t, ncclDevCommRequirements_t const*, ncclDevComm_t*) {
  ACCL_UNSUPPORTED(ncclDevCommCreate);
  return ncclInvalidUsage;
}
NCCL_API_ALIAS(ncclDevCommCreate)

extern "C" ncclResult_t pncclDevCommDestroy(ncclComm_t, ncclDevComm_t const*) {
  ACCL_UNSUPPORTED(ncclDevCommDestroy);
  return ncclInvalidUsage;
}
NCCL_API_ALIAS(ncclDevCommDestroy)

extern "C" ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t, size_t, int, void**) {
  ACCL_UNSUPPORTED(ncclGetLsaDevicePointer);
  return ncclInvalidUsage;
}
NCCL_API_ALIAS(ncclGetLsaDevicePointer)

extern "C" ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t, size_t, void**) {
  ACCL_UNSUPPORTED(ncclGetLsaMultimemDevicePointer);
  return ncclInvalidUsage;
}
NCCL_API_ALIAS(ncclGetLsaMultimemDevicePointer)

extern "C" ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t, size_t, ncclMultimemHandle_t, void**) {
  ACCL_UNSUPPORTED(ncclGetMultimemDevicePointer);
  return ncclInvalidUsage;
}
NCCL_API_ALIAS(ncclGetMultimemDevicePointer)

extern "C" ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t*, ncclDevResourceRequirements_t*) {
  ACCL_UNSUPPORTED(ncclGinBarrierCreateRequirement);
  return ncclInvalidUsage;
}
NCCL_API_ALIAS(ncclGinBarrierCreateRequirement)

extern "C" ncclResult_t pncclGinInboxA2ACreateRequirement(ncclTeam_t, int, int, ncclGinInboxA2AHandle*, ncclDevResourceRequirements_t*) {
  ACCL_UNSUPPORTED(ncclGinInboxA2ACreateRequirement);
  return ncclInvalidUsage;
}
NCCL_API_ALIAS(ncclGinInboxA2ACreateRequirement)

extern "C" ncclResult_t pncclGinOutboxCreateRequirement(int, int, ncclGinOutboxHandle*, ncclDevResourceRequirements_t*) {
  ACCL_UNSUPPORTED(ncclGinOutboxCreateRequirement);
  return ncclInvalidUsage;
}
NCCL_API_ALIAS(ncclGinOutboxCreateRequirement)

extern "C" int pncclLLA2ACalcSlots(int, int) {
  ACCL_UNSUPPORTED(ncclLLA2ACalcSlots);
  return -1;
}
NCCL_API_ALIAS(ncclLLA2ACalcSlots)

extern "C" ncclResult_t pncclLLA2ACreateRequirement(int, int, ncclLLA2AHandle_t*, ncclDevResourceRequirements_t*) {
  ACCL_UNSUPPORTED(ncclLLA2ACreateRequirement);
  return ncclInvalidUsage;
}
NCCL_API_ALIAS(ncclLLA2ACreateRequirement)

extern "C" ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t, int, ncclLsaBarrierHandle_t*, ncclDevResourceRequirements_t*) {
  ACCL_UNSUPPORTED(ncclLsaBarrierCreateRequirement);
  return ncclInvalidUsage;
}
NCCL_API_ALIAS(ncclLsaBarrierCreateRequirement)

extern "C" ncclTeam_t pncclTeamLsa(ncclComm_t) {
  ACCL_UNSUPPORTED(ncclTeamLsa);
  return ncclTeam_t{0, 0, 0};
}
NCCL_API_ALIAS(ncclTeamLsa)

extern "C" ncclTeam_t pncclTeamRail(ncclComm_t) {
  ACCL_UNSUPPORTED(ncclTeamRail);
  return ncclTeam_t{0, 0, 0};
}
NCCL_API_ALIAS(ncclTeamRail)

extern "C" ncclTeam_t pncclTeamWorld(ncclComm_t) {
  ACCL_UNSUPPORTED(ncclTeamWorld);
  return ncclTeam_t{0, 0, 0};
}
NCCL_API_ALIAS(ncclTeamWorld)

extern "C" int pncclTeamRankToLsa(ncclComm_t, ncclTeam_t, int) {
  ACCL_UNSUPPORTED(ncclTeamRankToLsa);
  return -1;
}
NCCL_API_ALIAS(ncclTeamRankToLsa)

extern "C" int pncclTeamRankToWorld(ncclComm_t, ncclTeam_t, int) {
  ACCL_UNSUPPORTED(ncclTeamRankToWorld);
  return -1;
}
NCCL_API_ALIAS(ncclTeamRankToWorld)
