// Dispatch: the op's Reducer, the tuner's algorithm, the algorithm.
#include "coll/coll.h"

#include "base/check.h"
#include "base/param.h"
#include "coll/dev_comm.h"
#include "coll/host_direct.h"
#include "coll/tuner.h"
#include "core/comm.h"
#include "core/redop.h"

namespace accl {

RingPath commRing(ncclComm* comm) {
  Ring& r = comm->ring;
  return {&r.order, r.position, r.send.get(), r.recv.get()};
}

void reduceAlone(const void* in, void* out, size_t count, size_t esize, const Reducer& red) {
  red.prepare(out, in, count, esize);
  red.finish(out, count);
}

// A host-buffer call's PreMulSum scalar in device memory (ncclScalarDevice),
// read once per call into a copy that no longer points at it.
static ncclResult_t resolveScalar(const CollArgs& a, CollArgs* out) {
  *out = a;
  if (!a.deviceScalar) return ncclSuccess;
  alignas(8) unsigned char copy[8];
  bool copied = false;
  NCCLCHECK(devReadScalar(a, copy, &copied));
  out->red.scalar = readScalar(a.type, copied ? copy : a.deviceScalar);
  out->deviceScalar = nullptr;
  return ncclSuccess;
}

ncclResult_t runCollective(const CollArgs& call) {
  if (isP2p(call.kind)) return runP2p(call.comm, {call});
  if (call.onDevice) return devRunCollective(call);
  NCCLCHECK(devBeforeHostOp(call.comm));
  CollArgs a;
  NCCLCHECK(resolveScalar(call, &a));
  // Where device-buffer calls between hosts go in chunks, host-buffer ones
  // go in the same chunks, so that every rank's host collectives pair up.
  if (const size_t per = devStagedChunk(a); per < a.count) return devRunHostChunks(a, per);
  const Reducer& red = a.red;
  bool direct = false;
  ncclResult_t r = hostDirectRun(a, red, &direct);
  if (direct) return r;
  if (runsAsSendRecv(a.kind)) {
    std::vector<CollArgs> ops;
    NCCLCHECK(asSendRecv(a, &ops));
    return ops.empty() ? ncclSuccess : runP2p(a.comm, ops);
  }
  Algo algo = chooseAlgo(a);
  if (algo == Algo::Default) {
    WARN("%s: no algorithm available for %s: the ranks' NCCL_ALGO (here '%s') together allow none that ACCL has "
         "(ring%s)", a.opName, collName(a.kind), paramString(Param::Algo),
         a.kind == CollKind::AllReduce ? ", tree, hier"
         : a.kind == CollKind::AllGather || a.kind == CollKind::ReduceScatter ? ", hier" : "");
    return ncclInvalidUsage;
  }
  TRACE(kColl, "%s count %zu %s algo %s", a.opName, a.count, typeName(a.type), algoName(algo));
  switch (a.kind) {
    case CollKind::AllReduce:
      return algo == Algo::Tree ? treeAllReduce(a, red)
             : algo == Algo::Hier ? hierAllReduce(a, red)
                                  : ringAllReduce(a, red, commRing(a.comm));
    case CollKind::Broadcast: return ringBroadcast(a);
    case CollKind::Reduce: return ringReduce(a, red);
    case CollKind::AllGather: return algo == Algo::Hier ? hierAllGather(a) : ringAllGather(a, commRing(a.comm));
    case CollKind::ReduceScatter:
      return algo == Algo::Hier ? hierReduceScatter(a, red) : ringReduceScatter(a, red, commRing(a.comm));
    default: return ncclInternalError;
  }
}

}  // namespace accl
