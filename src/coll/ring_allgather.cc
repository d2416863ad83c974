// Ring allgather: each rank's block travels n-1 hops around the ring; every
// rank copies each block into its place as it forwards it.
#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "coll/coll.h"
#include "coll/primitives.h"
#include "core/comm.h"

namespace accl {

ncclResult_t ringAllGather(const CollArgs& a, const RingPath& ring) {
  ncclComm* comm = a.comm;
  const size_t blockBytes = a.count * typeSize(a.type);
  const size_t stride = ring.stride ? ring.stride : blockBytes;
  const int n = ring.size();
  const char* src = static_cast<const char*>(a.sendbuff);
  char* dst = static_cast<char*>(a.recvbuff);
  char* mine = dst + static_cast<size_t>(ring.mine()) * stride;
  if (src != mine) memcpy(mine, src, blockBytes);  // in place: sendbuff is already our block
  if (n == 1) return ncclSuccess;
  Reducer none;
  Primitives prims(comm, a.opName, ring.recv, ring.send, &none, 1);
  const int pos = ring.position;
  auto blockOf = [&](int k) { return (*ring.blocks)[(pos + n - k) % n]; };  // the block moving at step k
  const size_t chunk = prims.maxChunkBytes();
  for (size_t off = 0; off < blockBytes; off += chunk) {
    size_t len = std::min(chunk, blockBytes - off);
    NCCLCHECK(prims.sendCopy(mine + off, len));
    for (int k = 1; k < n - 1; ++k)
      NCCLCHECK(prims.recvCopySend(dst + static_cast<size_t>(blockOf(k)) * stride + off, len));
    NCCLCHECK(prims.recv(dst + static_cast<size_t>(blockOf(n - 1)) * stride + off, len));
  }
  return prims.finish();
}

}  // namespace accl
