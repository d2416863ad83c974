// ncclCommSuspend, ncclCommResume, ncclCommMemStats.
//
// Suspend finishes the communicator's queued work and then refuses new
// operations until resume. ACCL frees no memory on suspend, also not with
// NCCL_SUSPEND_MEM: its device connectors are mapped by the peers' kernels, so
// freeing them would need every rank to agree, which suspend does not ask for.
// ncclCommMemStats says so truthfully: ncclStatGpuMemSuspend is 0 and all the
// communicator's device memory is ncclStatGpuMemPersist.
#include "api/api.h"

#include "api/init_common.h"
#include "base/check.h"
#include "coll/dev_comm.h"
#include "core/comm.h"

extern "C" ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  const char* fn = "ncclCommSuspend";
  NCCLCHECK(acclCheckUsable(comm, fn));
  if (flags & ~NCCL_SUSPEND_MEM) {
    WARN("%s: unknown flags 0x%x (0 or NCCL_SUSPEND_MEM)", fn, flags);
    return ncclInvalidArgument;
  }
  NCCLCHECK(accl::devWait(comm));  // nothing of this communicator is in flight once suspended
  comm->suspended.store(true);
  INFO(accl::kInit, "%s rank %d: suspended (ACCL keeps its %llu bytes of device memory)", comm->name.c_str(),
       comm->rank, static_cast<unsigned long long>(comm->gpuBytes.load()));
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclCommSuspend")
}
NCCL_API_ALIAS(ncclCommSuspend)

extern "C" ncclResult_t pncclCommResume(ncclComm_t comm) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  const char* fn = "ncclCommResume";
  NCCLCHECK(acclCheckComm(comm, fn));
  if (!comm->suspended.exchange(false)) {
    WARN("%s (%s, rank %d): the communicator is not suspended", fn, comm->name.c_str(), comm->rank);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclCommResume")
}
NCCL_API_ALIAS(ncclCommResume)

extern "C" ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  const char* fn = "ncclCommMemStats";
  NCCLCHECK(acclCheckComm(comm, fn));
  if (!value) {
    WARN("%s: value is NULL", fn);
    return ncclInvalidArgument;
  }
  switch (stat) {
    case ncclStatGpuMemSuspend: *value = 0; break;  // suspend frees nothing (see above)
    case ncclStatGpuMemSuspended: *value = comm->suspended.load() ? 1 : 0; break;
    case ncclStatGpuMemPersist:
    case ncclStatGpuMemTotal: *value = comm->gpuBytes.load(); break;
    default:
      WARN("%s: stat %d is not an ncclCommMemStat_t", fn, static_cast<int>(stat));
      return ncclInvalidArgument;
  }
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclCommMemStats")
}
NCCL_API_ALIAS(ncclCommMemStats)
