// Ring reduce-scatter: block b (destined for the rank at ring position b)
// starts at position b+1 and accumulates every rank's input over n-1 hops,
// ending complete at its owner.
#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "coll/coll.h"
#include "coll/primitives.h"
#include "core/comm.h"

namespace accl {

ncclResult_t ringReduceScatter(const CollArgs& a, const Reducer& red, const RingPath& ring) {
  ncclComm* comm = a.comm;
  const size_t esize = typeSize(a.type);
  const size_t blockBytes = a.count * esize;
  const int n = ring.size();
  const char* src = static_cast<const char*>(a.sendbuff);
  char* dst = static_cast<char*>(a.recvbuff);
  if (n == 1) {
    reduceAlone(src, dst, a.count, esize, red);
    return ncclSuccess;
  }
  Primitives prims(comm, a.opName, ring.recv, ring.send, &red, esize);
  const int pos = ring.position;
  auto input = [&](int k) {  // our input block for the block moving at step k
    return src + static_cast<size_t>((*ring.blocks)[(pos + n - k) % n]) * (ring.stride ? ring.stride : blockBytes);
  };
  const size_t chunk = prims.maxChunkBytes() / esize * esize;
  for (size_t off = 0; off < blockBytes; off += chunk) {
    size_t len = std::min(chunk, blockBytes - off);
    NCCLCHECK(prims.send(input(1) + off, len));
    for (int k = 2; k < n; ++k) NCCLCHECK(prims.recvReduceSend(input(k) + off, len));
    NCCLCHECK(prims.recvReduceCopy(input(0) + off, dst + off, len));
  }
  return prims.finish();
}

}  // namespace accl
