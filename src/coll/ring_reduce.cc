// Ring reduce: partial results flow once around the ring towards the root,
// starting at the rank after it; each rank combines its input on the way.
#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "coll/coll.h"
#include "coll/primitives.h"
#include "core/comm.h"

namespace accl {

ncclResult_t ringReduce(const CollArgs& a, const Reducer& red) {
  ncclComm* comm = a.comm;
  const size_t esize = typeSize(a.type);
  const int n = comm->nranks;
  const char* src = static_cast<const char*>(a.sendbuff);
  char* dst = static_cast<char*>(a.recvbuff);
  if (n == 1) {
    reduceAlone(src, dst, a.count, esize, red);
    return ncclSuccess;
  }
  Ring& ring = comm->ring;
  Primitives prims(comm, a.opName, ring.recv.get(), ring.send.get(), &red, esize);
  int rootPos = static_cast<int>(std::find(ring.order.begin(), ring.order.end(), a.root) - ring.order.begin());
  // 0: the rank after the root (starts the chain) ... n-1: the root.
  int rel = (ring.position - rootPos - 1 + 2 * n) % n;
  const size_t chunkElems = prims.maxChunkBytes() / esize;
  for (size_t off = 0; off < a.count; off += chunkElems) {
    size_t len = std::min(chunkElems, a.count - off) * esize;
    const char* in = src + off * esize;
    if (rel == 0) NCCLCHECK(prims.send(in, len));
    else if (rel == n - 1) NCCLCHECK(prims.recvReduceCopy(in, dst + off * esize, len));
    else NCCLCHECK(prims.recvReduceSend(in, len));
  }
  return prims.finish();
}

}  // namespace accl
