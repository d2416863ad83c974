// Collective and point-to-point entry points: check every argument, build the
// CollArgs, then run now (host mode completes before returning) or queue inside
// a group. All-to-all, gather and scatter are groups of sends and receives.
#include "api/api.h"
#include "api/init_common.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "coll/coll.h"
#include "core/check.h"
#include "core/comm.h"
#include "core/group.h"
#include "core/redop.h"
#include "device/dev_comm.h"

using accl::CollArgs;
using accl::CollKind;

namespace {

enum Needs : unsigned { kNone = 0, kOp = 1, kRoot = 2, kPeer = 4, kSend = 8, kRecv = 16 };

// `span`: how many count-sized blocks the largest buffer of the call holds (n for allgather output).
// For reducing calls it also resolves the op into a.red.
ncclResult_t checkArgs(CollArgs& a, unsigned needs, size_t span) {
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

// Runs a list of operations of one call as NCCL does: inside the caller's group
// if there is one, else as a group of their own.
ncclResult_t submitAll(const std::vector<CollArgs>& ops) {
  if (ops.empty()) return ncclSuccess;
  if (accl::groupActive()) {
    for (const CollArgs& a : ops) NCCLCHECK(accl::groupEnqueueColl(a));
    return ncclSuccess;
  }
  if (ops.size() == 1 && !accl::isP2p(ops[0].kind)) {
    accl::CommUse use(ops[0].comm);
    ncclResult_t r = accl::runCollective(ops[0]);
    ++ops[0].comm->opCount;
    return r;
  }
  NCCLCHECK(accl::groupStart());
  for (const CollArgs& a : ops) {
    ncclResult_t r = accl::groupEnqueueColl(a);
    if (r != ncclSuccess) {
      accl::groupDiscard();
      return r;
    }
  }
  return accl::groupEnd();
}

ncclResult_t submit(CollArgs a, unsigned needs, size_t span = 1) {
  NCCLCHECK(checkArgs(a, needs, span));
  if (a.count == 0) return ncclSuccess;
  return submitAll({a});
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

bool overlaps(const void* a, const void* b, size_t bytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

}  // namespace

extern "C" ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  return submit(make(CollKind::AllReduce, "ncclAllReduce", sendbuff, recvbuff, count, datatype, op, 0, comm, stream),
                kOp | kSend | kRecv);
  ACCL_API_GUARD_END("ncclAllReduce")
}
NCCL_API_ALIAS(ncclAllReduce)

extern "C" ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      int root, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  CollArgs a = make(CollKind::Broadcast, "ncclBroadcast", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
  // Only the root reads sendbuff.
  unsigned needs = kRoot | kRecv | (comm && accl::commValid(comm) && comm->rank == root ? kSend : kNone);
  return submit(a, needs);
  ACCL_API_GUARD_END("ncclBroadcast")
}
NCCL_API_ALIAS(ncclBroadcast)

extern "C" ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  return submit(make(CollKind::Broadcast, "ncclBcast", buff, buff, count, datatype, ncclSum, root, comm, stream),
                kRoot | kSend | kRecv);
  ACCL_API_GUARD_END("ncclBcast")
}
NCCL_API_ALIAS(ncclBcast)

extern "C" ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                   ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  CollArgs a = make(CollKind::Reduce, "ncclReduce", sendbuff, recvbuff, count, datatype, op, root, comm, stream);
  unsigned needs = kOp | kRoot | kSend | (comm && accl::commValid(comm) && comm->rank == root ? kRecv : kNone);
  return submit(a, needs);
  ACCL_API_GUARD_END("ncclReduce")
}
NCCL_API_ALIAS(ncclReduce)

extern "C" ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                      ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  CollArgs a = make(CollKind::AllGather, "ncclAllGather", sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream);
  size_t span = comm && accl::commValid(comm) ? comm->nranks : 1;
  return submit(a, kSend | kRecv, span);
  ACCL_API_GUARD_END("ncclAllGather")
}
NCCL_API_ALIAS(ncclAllGather)

extern "C" ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  CollArgs a = make(CollKind::ReduceScatter, "ncclReduceScatter", sendbuff, recvbuff, recvcount, datatype, op, 0,
                    comm, stream);
  size_t span = comm && accl::commValid(comm) ? comm->nranks : 1;
  return submit(a, kOp | kSend | kRecv, span);
  ACCL_API_GUARD_END("ncclReduceScatter")
}
NCCL_API_ALIAS(ncclReduceScatter)

extern "C" ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                 ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  return submit(make(CollKind::Send, "ncclSend", sendbuff, nullptr, count, datatype, ncclSum, peer, comm, stream),
                kPeer | kSend);
  ACCL_API_GUARD_END("ncclSend")
}
NCCL_API_ALIAS(ncclSend)

extern "C" ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                 cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  return submit(make(CollKind::Recv, "ncclRecv", nullptr, recvbuff, count, datatype, ncclSum, peer, comm, stream),
                kPeer | kRecv);
  ACCL_API_GUARD_END("ncclRecv")
}
NCCL_API_ALIAS(ncclRecv)

namespace {

// The host copy of an in-place all-to-all's input, but for block `skip` (the
// rank's own when the buffers coincide: it stays where it is). The communicator
// keeps the buffer and reuses it once no queued operation holds it any more
// (use_count 1): a fresh allocation on every call faulted in every page, which
// made the call three times slower than out of place.
ncclResult_t hostStagingCopy(ncclComm* comm, const void* src, size_t block, int skip, std::shared_ptr<void>* out) {
  const size_t bytes = block * comm->nranks;
  if (!comm->alltoallStaging || comm->alltoallStaging.use_count() > 1 || comm->alltoallStagingBytes < bytes) {
    comm->alltoallStaging.reset();
    comm->alltoallStaging.reset(malloc(bytes), free);
    comm->alltoallStagingBytes = comm->alltoallStaging ? bytes : 0;
    if (!comm->alltoallStaging) {
      WARN("ncclAlltoAll (%s, rank %d): cannot allocate %zu bytes to stage an in-place all-to-all",
           comm->name.c_str(), comm->rank, bytes);
      return ncclSystemError;
    }
  }
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(comm->alltoallStaging.get());
  const size_t head = skip < 0 ? bytes : block * skip, tail = skip < 0 ? bytes : head + block;
  memcpy(to, from, head);
  memcpy(to + tail, from + tail, bytes - tail);
  *out = comm->alltoallStaging;
  return ncclSuccess;
}

}  // namespace

extern "C" ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  CollArgs base = make(CollKind::Send, "ncclAlltoAll", sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream);
  size_t span = comm && accl::commValid(comm) ? comm->nranks : 1;
  NCCLCHECK(checkArgs(base, kSend | kRecv, span));
  if (count == 0) return ncclSuccess;
  const int n = comm->nranks;
  const size_t block = count * accl::typeSize(datatype);
  std::shared_ptr<void> keep;
  const char* src = static_cast<const char*>(sendbuff);
  const bool inPlace = overlaps(sendbuff, recvbuff, block * n);
  if (inPlace) {  // send from a copy
    if (base.onDevice) NCCLCHECK(accl::devStagingCopy(comm, sendbuff, block * n, stream, &keep));
    else NCCLCHECK(hostStagingCopy(comm, sendbuff, block, sendbuff == recvbuff ? comm->rank : -1, &keep));
    src = static_cast<const char*>(keep.get());
  }
  std::vector<CollArgs> ops;
  for (int r = 0; r < n; ++r) {
    if (inPlace && r == comm->rank && sendbuff == recvbuff) continue;  // its own block is already in place
    CollArgs s = base, v = base;
    s.kind = CollKind::Send;
    s.sendbuff = src + r * block;
    s.root = r;
    s.keep = keep;
    v.kind = CollKind::Recv;
    v.recvbuff = static_cast<char*>(recvbuff) + r * block;
    v.root = r;
    ops.push_back(s);
    ops.push_back(v);
  }
  return submitAll(ops);
  ACCL_API_GUARD_END("ncclAlltoAll")
}
NCCL_API_ALIAS(ncclAlltoAll)

namespace {

// Gather (blocks flow to the root) or scatter (blocks flow from it): every rank
// sends or receives its block; the root does the other side for each rank.
ncclResult_t rooted(CollArgs base, bool gather) {
  ncclComm* comm = base.comm;
  bool isRoot = comm && accl::commValid(comm) && comm->rank == base.root;
  size_t span = comm && accl::commValid(comm) ? comm->nranks : 1;
  unsigned mine = gather ? kSend : kRecv, roots = gather ? kRecv : kSend;
  NCCLCHECK(checkArgs(base, kRoot | mine | (isRoot ? roots : kNone), span));
  if (base.count == 0) return ncclSuccess;
  base.kind = gather ? CollKind::Send : CollKind::Recv;
  std::vector<CollArgs> ops{base};
  if (isRoot) {
    const size_t block = base.count * accl::typeSize(base.type);
    for (int r = 0; r < comm->nranks; ++r) {
      CollArgs o = base;
      o.kind = gather ? CollKind::Recv : CollKind::Send;
      if (gather) o.recvbuff = static_cast<char*>(base.recvbuff) + r * block;
      else o.sendbuff = static_cast<const char*>(base.sendbuff) + r * block;
      o.root = r;
      ops.push_back(o);
    }
  }
  return submitAll(ops);
}

}  // namespace

extern "C" ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                   int root, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  return rooted(make(CollKind::Send, "ncclGather", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream), true);
  ACCL_API_GUARD_END("ncclGather")
}
NCCL_API_ALIAS(ncclGather)

extern "C" ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  return rooted(make(CollKind::Recv, "ncclScatter", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream),
                false);
  ACCL_API_GUARD_END("ncclScatter")
}
NCCL_API_ALIAS(ncclScatter)

extern "C" ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                 ncclScalarResidence_t residence, ncclComm_t comm) {
  ACCL_API_GUARD_BEGIN
  if (!comm || !accl::commValid(comm)) {
    WARN("ncclRedOpCreatePreMulSum: comm %p is not a live communicator", static_cast<void*>(comm));
    return ncclInvalidArgument;
  }
  return accl::createPreMulSum(comm, op, scalar, datatype, residence);
  ACCL_API_GUARD_END("ncclRedOpCreatePreMulSum")
}
NCCL_API_ALIAS(ncclRedOpCreatePreMulSum)

extern "C" ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  ACCL_API_GUARD_BEGIN
  if (!comm || !accl::commValid(comm)) {
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
