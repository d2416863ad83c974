// Collective and point-to-point entry points: check every argument, build the
// CollArgs, then run now (host mode completes before returning) or queue inside
// a group. All-to-all, gather and scatter are sends and receives (or inline:
// coll/send_recv_colls.cc). Each call pins its communicator first
// (CommUse::ifLive), so that it stays allocated from the checks to the end.
#include "api/api.h"
#include "api/init_common.h"

#include <cstdint>
#include <vector>

#include "base/check.h"
#include "coll/coll.h"
#include "coll/dev_comm.h"
#include "core/comm.h"
#include "core/redop.h"
#include "core/self_wait.h"
#include "init/group.h"

using accl::CollArgs;
using accl::CollKind;

namespace {

enum Needs : unsigned { kNone = 0, kOp = 1, kRoot = 2, kPeer = 4, kSend = 8, kRecv = 16 };

// `span`: how many count-sized blocks the largest buffer of the call holds (n for allgather output).
// For reducing calls it also resolves the op into a.red.
ncclResult_t validate(CollArgs& a, unsigned needs, size_t span) {
  const char* fn = a.opName;
  NCCLCHECK(acclCheckUsable(a.comm, fn));
  ncclComm* comm = a.comm;
  if (static_cast<int>(a.type) < 0 || static_cast<int>(a.type) >= ncclNumTypes) {
    WARN("%s: datatype %d is not an ncclDataType_t (0..%d)", fn, static_cast<int>(a.type), ncclNumTypes - 1);
    return ncclInvalidArgument;
  }
  if (a.count > SIZE_MAX / accl::typeSize(a.type) / span) {
    WARN("%s: count %zu of %s overflows the address space", fn, a.count, accl::typeName(a.type));
    return ncclInvalidArgument;
  }
  if ((needs & kRoot) && (a.root < 0 || a.root >= comm->nranks)) {
    WARN("%s: root %d is outside [0, nranks = %d)", fn, a.root, comm->nranks);
    return ncclInvalidArgument;
  }
  if ((needs & kPeer) && (a.root < 0 || a.root >= comm->nranks)) {
    WARN("%s: peer %d is outside [0, nranks = %d)", fn, a.root, comm->nranks);
    return ncclInvalidArgument;
  }
  if (needs & kOp) NCCLCHECK(accl::resolveOp(comm, a.op, a.type, fn, &a.red, &a.deviceScalar));
  if (a.count > 0 && (needs & kSend) && !a.sendbuff) {
    WARN("%s: sendbuff is NULL with count = %zu", fn, a.count);
    return ncclInvalidArgument;
  }
  if (a.count > 0 && (needs & kRecv) && !a.recvbuff) {
    WARN("%s: recvbuff is NULL with count = %zu", fn, a.count);
    return ncclInvalidArgument;
  }
  if (comm->deviceMode && a.count > 0) {
    // Device buffers run as kernels on the stream; host buffers on the host executor.
    const void* bufs[2] = {(needs & kSend) ? a.sendbuff : nullptr, (needs & kRecv) ? a.recvbuff : nullptr};
    int dev = 0, host = 0;
    for (const void* b : bufs) {
      if (!b) continue;
      if (accl::devBuffer(b)) ++dev;
      else ++host;
    }
    if (dev && host) {
      WARN("%s (%s, rank %d): one buffer is device memory and the other host memory; both must be the same kind",
           fn, comm->name.c_str(), comm->rank);
      return ncclInvalidArgument;
    }
    a.onDevice = dev > 0;
  }
  return ncclSuccess;
}

// Inside a group, a call with bad arguments fails the group (init/group.h).
ncclResult_t checkArgs(CollArgs& a, unsigned needs, size_t span) { return accl::groupFail(validate(a, needs, span)); }

// Runs the operations of one call as NCCL does: inside the caller's group if
// there is one, else as a group of their own. (A pointer and a count, so that
// a call of one operation allocates no list.)
ncclResult_t submitAll(const CollArgs* ops, size_t n) {
  if (n == 0) return ncclSuccess;
  if (accl::groupActive()) {
    for (size_t i = 0; i < n; ++i) NCCLCHECK(accl::groupEnqueueColl(ops[i]));
    return ncclSuccess;
  }
  if (n == 1 && !accl::isP2p(ops[0].kind)) {
    accl::SelfWaitCall calling(ops[0].comm);
    ncclResult_t r = accl::runCollective(ops[0]);
    ++ops[0].comm->opCount;
    return r;
  }
  NCCLCHECK(accl::groupStart());
  for (size_t i = 0; i < n; ++i) {
    ncclResult_t r = accl::groupEnqueueColl(ops[i]);
    if (r != ncclSuccess) {
      accl::groupDiscard();
      return r;
    }
  }
  return accl::groupEnd();
}

// How many count-sized blocks the largest buffer of a call on `comm` holds, for checkArgs.
size_t spanOf(ncclComm* comm, const accl::CommUse& use) { return use ? comm->nranks : 1; }

ncclResult_t submit(CollArgs a, unsigned needs, size_t span = 1) {
  NCCLCHECK(checkArgs(a, needs, span));
  if (a.count == 0) return ncclSuccess;
  return submitAll(&a, 1);
}

CollArgs make(CollKind kind, const char* name, const void* send, void* recv, size_t count, ncclDataType_t type,
              ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  CollArgs a{};
  a.kind = kind;
  a.opName = name;
  a.sendbuff = send;
  a.recvbuff = recv;
  a.count = count;
  a.type = type;
  a.op = op;
  a.root = root;
  a.comm = comm;
  a.stream = stream;
  return a;
}

}  // namespace

extern "C" ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  return submit(make(CollKind::AllReduce, "ncclAllReduce", sendbuff, recvbuff, count, datatype, op, 0, comm, stream),
                kOp | kSend | kRecv);
  ACCL_API_GUARD_END("ncclAllReduce")
}
NCCL_API_ALIAS(ncclAllReduce)

extern "C" ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      int root, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  CollArgs a = make(CollKind::Broadcast, "ncclBroadcast", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
  // Only the root reads sendbuff.
  unsigned needs = kRoot | kRecv | (use && comm->rank == root ? kSend : kNone);
  return submit(a, needs);
  ACCL_API_GUARD_END("ncclBroadcast")
}
NCCL_API_ALIAS(ncclBroadcast)

extern "C" ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  return submit(make(CollKind::Broadcast, "ncclBcast", buff, buff, count, datatype, ncclSum, root, comm, stream),
                kRoot | kSend | kRecv);
  ACCL_API_GUARD_END("ncclBcast")
}
NCCL_API_ALIAS(ncclBcast)

extern "C" ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                   ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  CollArgs a = make(CollKind::Reduce, "ncclReduce", sendbuff, recvbuff, count, datatype, op, root, comm, stream);
  unsigned needs = kOp | kRoot | kSend | (use && comm->rank == root ? kRecv : kNone);
  return submit(a, needs);
  ACCL_API_GUARD_END("ncclReduce")
}
NCCL_API_ALIAS(ncclReduce)

extern "C" ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                      ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  CollArgs a = make(CollKind::AllGather, "ncclAllGather", sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream);
  return submit(a, kSend | kRecv, spanOf(comm, use));
  ACCL_API_GUARD_END("ncclAllGather")
}
NCCL_API_ALIAS(ncclAllGather)

extern "C" ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  CollArgs a = make(CollKind::ReduceScatter, "ncclReduceScatter", sendbuff, recvbuff, recvcount, datatype, op, 0,
                    comm, stream);
  return submit(a, kOp | kSend | kRecv, spanOf(comm, use));
  ACCL_API_GUARD_END("ncclReduceScatter")
}
NCCL_API_ALIAS(ncclReduceScatter)

extern "C" ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                 ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  return submit(make(CollKind::Send, "ncclSend", sendbuff, nullptr, count, datatype, ncclSum, peer, comm, stream),
                kPeer | kSend);
  ACCL_API_GUARD_END("ncclSend")
}
NCCL_API_ALIAS(ncclSend)

extern "C" ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                 cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  return submit(make(CollKind::Recv, "ncclRecv", nullptr, recvbuff, count, datatype, ncclSum, peer, comm, stream),
                kPeer | kRecv);
  ACCL_API_GUARD_END("ncclRecv")
}
NCCL_API_ALIAS(ncclRecv)

namespace {

// All-to-all, gather and scatter: one operation in host mode, which runs
// inline when small on one host and as sends and receives otherwise
// (coll/send_recv_colls.cc), decided when it runs, alike on every rank
// whether or not it is inside a group. Device buffers become the sends and
// receives now, which join the group's kernel; but ranks of one process on
// one GPU run each as one direct collective.
ncclResult_t submitSendRecvColl(CollArgs a, unsigned needs, size_t span) {
  NCCLCHECK(checkArgs(a, needs, span));
  if (a.count == 0) return ncclSuccess;
  if (!a.onDevice || accl::devDirectSendRecvColls(a.comm)) return submitAll(&a, 1);
  std::vector<CollArgs> ops;
  NCCLCHECK(accl::asSendRecv(a, &ops));
  return submitAll(ops.data(), ops.size());
}

}  // namespace

extern "C" ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  return submitSendRecvColl(
      make(CollKind::AllToAll, "ncclAlltoAll", sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream),
      kSend | kRecv, spanOf(comm, use));
  ACCL_API_GUARD_END("ncclAlltoAll")
}
NCCL_API_ALIAS(ncclAlltoAll)

extern "C" ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                   int root, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  const bool isRoot = use && comm->rank == root;
  return submitSendRecvColl(
      make(CollKind::Gather, "ncclGather", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream),
      kRoot | kSend | (isRoot ? kRecv : kNone), spanOf(comm, use));
  ACCL_API_GUARD_END("ncclGather")
}
NCCL_API_ALIAS(ncclGather)

extern "C" ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  const bool isRoot = use && comm->rank == root;
  return submitSendRecvColl(
      make(CollKind::Scatter, "ncclScatter", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream),
      kRoot | kRecv | (isRoot ? kSend : kNone), spanOf(comm, use));
  ACCL_API_GUARD_END("ncclScatter")
}
NCCL_API_ALIAS(ncclScatter)

extern "C" ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                 ncclScalarResidence_t residence, ncclComm_t comm) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  if (!use) {
    WARN("ncclRedOpCreatePreMulSum: comm %p is not a live communicator", static_cast<void*>(comm));
    return ncclInvalidArgument;
  }
  return accl::createPreMulSum(comm, op, scalar, datatype, residence);
  ACCL_API_GUARD_END("ncclRedOpCreatePreMulSum")
}
NCCL_API_ALIAS(ncclRedOpCreatePreMulSum)

extern "C" ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  if (!use) {
    WARN("ncclRedOpDestroy: comm %p is not a live communicator", static_cast<void*>(comm));
    return ncclInvalidArgument;
  }
  return accl::destroyOp(comm, op);
  ACCL_API_GUARD_END("ncclRedOpDestroy")
}
NCCL_API_ALIAS(ncclRedOpDestroy)

extern "C" ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  ACCL_API_GUARD_BEGIN
  return accl::groupSimulateEnd(simInfo);
  ACCL_API_GUARD_END("ncclGroupSimulateEnd")
}
NCCL_API_ALIAS(ncclGroupSimulateEnd)
