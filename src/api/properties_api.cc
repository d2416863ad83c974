// ncclCommQueryProperties: what a communicator offers, in NCCL 2.30's
// versioned struct. ACCL has no device API (GPU-initiated communication), so
// a program that asks before it uses one learns so here rather than from an
// error of ncclDevCommCreate; host-initiated one-sided calls (ncclPutSignal,
// ncclSignal, ncclWaitSignal) work in every mode.
#include "api/api.h"

#include <cstddef>

#include "api/init_common.h"
#include "base/check.h"
#include "core/comm.h"

namespace {

// Writes `field` only where the caller's struct (an older header's may be
// shorter) has room for it.
template <typename T>
void setIfRoom(ncclCommProperties_t* props, T ncclCommProperties_t::*field, T value) {
  const size_t end = reinterpret_cast<const char*>(&(props->*field)) - reinterpret_cast<const char*>(props) + sizeof(T);
  if (end <= props->size) props->*field = value;
}

}  // namespace

extern "C" ncclResult_t pncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props) {
  ACCL_API_GUARD_BEGIN
  const char* fn = "ncclCommQueryProperties";
  const auto use = accl::CommUse::ifLive(comm);
  NCCLCHECK(acclCheckInitDone(comm, fn));  // an init still running sets its device meanwhile
  if (!props) {
    WARN("%s: props is NULL", fn);
    return ncclInvalidArgument;
  }
  if (props->magic != NCCL_API_MAGIC || props->size < offsetof(ncclCommProperties_t, rank)) {
    WARN("%s: props has magic 0x%x and size %zu: initialise it with NCCL_COMM_PROPERTIES_INITIALIZER", fn,
         props->magic, props->size);
    return ncclInvalidArgument;
  }
  setIfRoom(props, &ncclCommProperties_t::rank, comm->rank);
  setIfRoom(props, &ncclCommProperties_t::nRanks, comm->nranks);
  setIfRoom(props, &ncclCommProperties_t::cudaDev, comm->cudaDev);
  setIfRoom(props, &ncclCommProperties_t::nvmlDev, comm->nvmlDev);
  setIfRoom(props, &ncclCommProperties_t::deviceApiSupport, false);
  setIfRoom(props, &ncclCommProperties_t::multimemSupport, false);
  setIfRoom(props, &ncclCommProperties_t::ginType, NCCL_GIN_TYPE_NONE);
  setIfRoom(props, &ncclCommProperties_t::nLsaTeams, 0);
  setIfRoom(props, &ncclCommProperties_t::hostRmaSupport, true);
  setIfRoom(props, &ncclCommProperties_t::railedGinType, NCCL_GIN_TYPE_NONE);
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclCommQueryProperties")
}
NCCL_API_ALIAS(ncclCommQueryProperties)
