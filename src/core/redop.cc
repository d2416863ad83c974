#include "base/version.h"
#include "core/redop.h"

#include <atomic>
#include <cstring>

#include "base/check.h"
#include "core/comm.h"
#include "device/lowp_scalar.h"
#include "accl.h"

namespace accl {
namespace {

// ncclRedOp_t values of user ops are unique in the process, so an op used on a
// communicator it was not made on is recognised as foreign.
std::atomic<int> nextUserOp{ncclNumOps};

}  // namespace

// Reads one element of `type` at p as a Scalar (float value for floating types, integer otherwise).
Scalar readScalar(ncclDataType_t type, const void* p) {
  Scalar s;
  switch (type) {
    case ncclInt8: s.i = *static_cast<const int8_t*>(p); break;
    case ncclUint8: s.i = *static_cast<const uint8_t*>(p); break;
    case ncclInt32: s.i = *static_cast<const int32_t*>(p); break;
    case ncclUint32: s.i = *static_cast<const uint32_t*>(p); break;
    case ncclInt64: s.i = *static_cast<const int64_t*>(p); break;
    case ncclUint64: s.i = static_cast<int64_t>(*static_cast<const uint64_t*>(p)); break;
    case ncclFloat32: s.f = *static_cast<const float*>(p); break;
    case ncclFloat64: s.f = *static_cast<const double*>(p); break;
    default: s.f = lowpScalarToDouble(type, p); break;
  }
  return s;
}

const char* opName(ncclComm* comm, ncclRedOp_t op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg"};
  int o = static_cast<int>(op);
  if (o >= 0 && o < ncclNumOps) return kNames[o];
  return comm && comm->userOps.count(o) ? "premulsum" : "invalid";
}

ncclResult_t resolveOp(ncclComm* comm, ncclRedOp_t op, ncclDataType_t type, const char* fn, Reducer* out,
                       const void** scalarPtr) {
  *out = Reducer();
  *scalarPtr = nullptr;
  int o = static_cast<int>(op);
  OpKind kind;
  if (o >= 0 && o < ncclNumOps) {
    switch (op) {
      case ncclSum: kind = OpKind::Sum; break;
      case ncclProd: kind = OpKind::Prod; break;
      case ncclMax: kind = OpKind::Max; break;
      case ncclMin: kind = OpKind::Min; break;
      default:  // ncclAvg, as NCCL: floats multiply each input by 1/n; integers divide the sum by n
        if (typeIsFloating(type)) {
          kind = OpKind::PreMulSum;
          out->scalar.f = 1.0 / comm->nranks;
        } else {
          kind = OpKind::SumPostDiv;
          out->scalar.i = comm->nranks;
        }
        break;
    }
  } else {
    auto it = comm->userOps.find(o);
    if (it == comm->userOps.end()) {
      WARN("%s: op %d is not a reduction operation of this communicator (a built-in op, or one made by "
           "ncclRedOpCreatePreMulSum on this communicator and not destroyed)", fn, o);
      return ncclInvalidArgument;
    }
    const UserOp& u = it->second;
    if (u.type != type) {
      WARN("%s: op %d was created for %s but the call uses %s", fn, o, typeName(u.type), typeName(type));
      return ncclInvalidArgument;
    }
    kind = OpKind::PreMulSum;
    out->scalar = u.value;
    if (u.deviceScalar) *scalarPtr = u.scalarPtr;
  }
  out->kind = kind;
  if (!hostKernels(type, kind, &out->k)) {
    WARN("%s: %s with %s is not supported by ACCL %s yet (see docs/api-status.md)", fn, opName(comm, op),
         typeName(type), versionString());
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

ncclResult_t createPreMulSum(ncclComm* comm, ncclRedOp_t* op, const void* scalar, ncclDataType_t type,
                             ncclScalarResidence_t residence) {
  if (!op || !scalar) {
    WARN("ncclRedOpCreatePreMulSum: %s is NULL", op ? "scalar" : "op");
    return ncclInvalidArgument;
  }
  if (static_cast<int>(type) < 0 || static_cast<int>(type) >= ncclNumTypes) {
    WARN("ncclRedOpCreatePreMulSum: datatype %d is not an ncclDataType_t", static_cast<int>(type));
    return ncclInvalidArgument;
  }
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate) {
    WARN("ncclRedOpCreatePreMulSum: residence %d is neither ncclScalarDevice nor ncclScalarHostImmediate",
         static_cast<int>(residence));
    return ncclInvalidArgument;
  }
  UserOp u;
  u.type = type;
  u.deviceScalar = residence == ncclScalarDevice;
  u.scalarPtr = scalar;  // device mode would read GPU memory; host mode reads host memory at each use
  if (!u.deviceScalar) u.value = readScalar(type, scalar);
  int id = nextUserOp.fetch_add(1);
  comm->userOps[id] = u;
  *op = static_cast<ncclRedOp_t>(id);
  return ncclSuccess;
}

ncclResult_t destroyOp(ncclComm* comm, ncclRedOp_t op) {
  int o = static_cast<int>(op);
  if (o >= 0 && o < ncclNumOps) {
    WARN("ncclRedOpDestroy: op %d is a built-in operation and cannot be destroyed", o);
    return ncclInvalidArgument;
  }
  if (!comm->userOps.erase(o)) {
    WARN("ncclRedOpDestroy: op %d was not created on this communicator (or was already destroyed)", o);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

}  // namespace accl
