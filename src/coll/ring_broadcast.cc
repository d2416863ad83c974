// Ring broadcast: the root's buffer flows once around the ring, chunk by
// chunk; every rank but the last forwards each chunk as it copies it out.
#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "coll/coll.h"
#include "coll/primitives.h"
#include "core/comm.h"

namespace accl {

ncclResult_t ringBroadcast(const CollArgs& a) {
  ncclComm* comm = a.comm;
  const size_t bytes = a.count * typeSize(a.type);
  const int n = comm->nranks;
  const char* src = static_cast<const char*>(a.sendbuff);
  char* dst = static_cast<char*>(a.recvbuff);
  const bool isRoot = comm->rank == a.root;
  if (isRoot && src != dst) memcpy(dst, src, bytes);
  if (n == 1) return ncclSuccess;
  Ring& ring = comm->ring;
  Reducer none;
  Primitives prims(comm, a.opName, ring.recv.get(), ring.send.get(), &none, 1);
  // Ring positions relative to the root: 0 is the root, n-1 the last to receive.
  int rootPos = static_cast<int>(std::find(ring.order.begin(), ring.order.end(), a.root) - ring.order.begin());
  int rel = (ring.position - rootPos + n) % n;
  const size_t chunk = prims.maxChunkBytes();
  for (size_t off = 0; off < bytes; off += chunk) {
    size_t len = std::min(chunk, bytes - off);
    if (rel == 0) NCCLCHECK(prims.sendCopy(src + off, len));
    else if (rel == n - 1) NCCLCHECK(prims.recv(dst + off, len));
    else NCCLCHECK(prims.recvCopySend(dst + off, len));
  }
  return prims.finish();
}

}  // namespace accl
