// Ring allreduce: a reduce-scatter pass (each rank accumulates one block as it
// travels n-1 hops) followed by an allgather pass (each finished block travels
// n-1 hops more). The buffer is processed in loops of n chunks, one FIFO slot
// each, so transfers pipeline through the connectors and any size works.
#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "coll/coll.h"
#include "coll/primitives.h"
#include "core/comm.h"

namespace accl {

ncclResult_t ringAllReduce(const CollArgs& a, const Reducer& red, const RingPath& ring) {
  ncclComm* comm = a.comm;
  const size_t esize = typeSize(a.type);
  const int n = ring.size();
  const char* src = static_cast<const char*>(a.sendbuff);
  char* dst = static_cast<char*>(a.recvbuff);
  if (n == 1) {
    reduceAlone(src, dst, a.count, esize, red);
    return ncclSuccess;
  }
  Primitives prims(comm, a.opName, ring.recv, ring.send, &red, esize);
  // Chunks are whole elements and, where possible, whole cache lines.
  const size_t chunkElems = prims.maxChunkBytes() / esize;
  const size_t align = std::max<size_t>(1, 64 / esize);
  const size_t loopElems = chunkElems * n;
  const int pos = ring.position;

  for (size_t base = 0; base < a.count; base += loopElems) {
    const size_t rem = std::min(loopElems, a.count - base);
    size_t per = (rem + n - 1) / n;
    per = std::min(chunkElems, (per + align - 1) / align * align);
    // Block c of this loop: [base + c*per, base + min((c+1)*per, rem)).
    auto off = [&](int c) { return (base + std::min(rem, c * per)) * esize; };
    auto len = [&](int c) { return (std::min(rem, (c + 1) * per) - std::min(rem, c * per)) * esize; };
    auto block = [&](int k) { return (pos + n - k) % n; };  // the block handled at step k

    int c = block(1);
    NCCLCHECK(prims.send(src + off(c), len(c)));
    for (int k = 2; k < n; ++k) {
      c = block(k);
      NCCLCHECK(prims.recvReduceSend(src + off(c), len(c)));
    }
    c = block(0);
    NCCLCHECK(prims.recvReduceCopySend(src + off(c), dst + off(c), len(c)));
    for (int k = 1; k < n - 1; ++k) {
      c = block(k);
      NCCLCHECK(prims.recvCopySend(dst + off(c), len(c)));
    }
    c = block(n - 1);
    NCCLCHECK(prims.recv(dst + off(c), len(c)));
  }
  return prims.finish();
}

}  // namespace accl
