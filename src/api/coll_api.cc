// Collective entry points: check every argument, build a CollArgs, run it now
// (host mode completes before returning) or queue it inside a group.
#include "api/api.h"

#include <cstdint>

#include "coll/coll.h"
#include "core/check.h"
#include "core/comm.h"
#include "core/group.h"
#include "device/host_reduce.h"

namespace {

// Checks shared by every collective; `needsOp` for the reducing ones.
ncclResult_t checkCollArgs(const accl::CollArgs& a, bool needsOp) {
  const char* fn = a.opName;
  if (!a.comm) {
    WARN("%s: comm is NULL", fn);
    return ncclInvalidArgument;
  }
  if (!accl::commValid(a.comm)) {
    WARN("%s: comm %p is not a live communicator (destroyed, aborted or never created)", fn,
         static_cast<const void*>(a.comm));
    return ncclInvalidArgument;
  }
  ncclComm* comm = a.comm;
  if (!comm->initDone.load()) {
    WARN("%s (%s, rank %d): the communicator is still initialising (non-blocking init: poll "
         "ncclCommGetAsyncError until it is not ncclInProgress)", fn, comm->name.c_str(), comm->rank);
    return ncclInvalidUsage;
  }
  int async = comm->asyncError.load();
  if (async != ncclSuccess) {
    WARN("%s (%s, rank %d): the communicator failed earlier (%s); abort or destroy it", fn, comm->name.c_str(),
         comm->rank, pncclGetErrorString(static_cast<ncclResult_t>(async)));
    return static_cast<ncclResult_t>(async);
  }
  if (static_cast<int>(a.type) < 0 || static_cast<int>(a.type) >= ncclNumTypes) {
    WARN("%s: datatype %d is not an ncclDataType_t (0..%d)", fn, static_cast<int>(a.type), ncclNumTypes - 1);
    return ncclInvalidArgument;
  }
  size_t esize = accl::typeSize(a.type);
  if (a.count > SIZE_MAX / esize / static_cast<size_t>(comm->nranks)) {
    WARN("%s: count %zu of %s overflows the address space", fn, a.count, accl::typeName(a.type));
    return ncclInvalidArgument;
  }
  if (needsOp) {
    if (static_cast<int>(a.op) < 0 || static_cast<int>(a.op) >= ncclNumOps) {
      WARN("%s: op %d is not a reduction operation of this communicator (ncclSum..ncclAvg)", fn,
           static_cast<int>(a.op));
      return ncclInvalidArgument;
    }
    if (!accl::hostReduceFn(a.type, a.op)) {
      WARN("%s: %s with %s is not supported by ACCL %s yet (see docs/api-status.md)", fn,
           accl::opName(a.op), accl::typeName(a.type), acclGetVersionString());
      return ncclInvalidUsage;
    }
  }
  if (a.count > 0 && (!a.sendbuff || !a.recvbuff)) {
    WARN("%s: %s is NULL with count = %zu", fn, a.sendbuff ? "recvbuff" : "sendbuff", a.count);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t submit(const accl::CollArgs& a, bool needsOp) {
  NCCLCHECK(checkCollArgs(a, needsOp));
  if (a.count == 0) return ncclSuccess;
  if (accl::groupActive()) {
    accl::groupEnqueueColl(a);
    return ncclSuccess;
  }
  accl::CommUse use(a.comm);
  ncclResult_t r = accl::runCollective(a);
  ++a.comm->opCount;
  return r;
}

}  // namespace

extern "C" ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t /*stream: host mode*/) {
  ACCL_API_GUARD_BEGIN
  accl::CollArgs a{accl::CollKind::AllReduce, "ncclAllReduce", sendbuff, recvbuff, count, datatype, op, 0, comm};
  return submit(a, true);
  ACCL_API_GUARD_END("ncclAllReduce")
}
NCCL_API_ALIAS(ncclAllReduce)
