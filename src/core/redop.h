// Reduction operations of a communicator: the built-in ones and those made
// by ncclRedOpCreatePreMulSum, turned into a Reducer for the executors.
#pragma once

#include "device/host_reduce.h"
#include "nccl.h"

struct ncclComm;

namespace accl {

// Checks `op` for `type` on `comm` (a user op must belong to this comm and match
// the datatype) and fills the Reducer. For a device-resident scalar,
// *scalarPtr is set (read it with readScalar when the operation runs); else NULL.
// ncclInvalidArgument (unknown op), ncclInvalidUsage (pair not supported yet).
// Called when an operation is issued: an op may be destroyed as soon as the call
// that uses it returns, even inside a group (as NCCL allows).
ncclResult_t resolveOp(ncclComm* comm, ncclRedOp_t op, ncclDataType_t type, const char* fn, Reducer* out,
                       const void** scalarPtr);
// One element of `type` at p, as a Scalar.
Scalar readScalar(ncclDataType_t type, const void* p);
const char* opName(ncclComm* comm, ncclRedOp_t op);

ncclResult_t createPreMulSum(ncclComm* comm, ncclRedOp_t* op, const void* scalar, ncclDataType_t type,
                             ncclScalarResidence_t residence);
ncclResult_t destroyOp(ncclComm* comm, ncclRedOp_t op);

}  // namespace accl
