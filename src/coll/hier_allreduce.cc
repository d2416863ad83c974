// Hierarchical allreduce for rail-optimised fabrics (coll/hier.h): a
// reduce-scatter among each host's ranks leaves the rank at place i with
// block i of the host's sum; an allreduce of block i along its rail (the
// ranks at place i of every host, each over its own NIC, all rails at once,
// nothing crossing rails); an allgather within the host. The same bytes
// cross between two hosts as in the flat ring's hop, spread over all L ranks
// and NICs instead of the one rank where the ring leaves the host. Elements
// past the last whole block per rank (fewer than L) take the flat ring.
#include "base/check.h"
#include "coll/hier.h"

namespace accl {

ncclResult_t hierAllReduce(const CollArgs& a, const Reducer& red) {
  Hier* h = nullptr;
  Reducer first, across;
  NCCLCHECK(hierReducing(a, red, &h, &first, &across));
  const size_t esize = typeSize(a.type);
  const size_t per = a.count / h->places.size(), whole = per * h->places.size();
  const char* src = static_cast<const char*>(a.sendbuff);
  char* dst = static_cast<char*>(a.recvbuff);
  char* block = dst + static_cast<size_t>(h->place) * per * esize;
  CollArgs part = a;
  part.count = per;
  part.recvbuff = block;
  NCCLCHECK(ringReduceScatter(part, first, h->local(h->places)));
  part.sendbuff = block;
  NCCLCHECK(ringAllReduce(part, across, h->rail(h->hosts)));
  part.recvbuff = dst;
  NCCLCHECK(ringAllGather(part, h->local(h->places)));
  if (whole == a.count) return ncclSuccess;
  CollArgs rest = a;
  rest.count = a.count - whole;
  rest.sendbuff = src + whole * esize;
  rest.recvbuff = dst + whole * esize;
  return ringAllReduce(rest, red, commRing(a.comm));
}

}  // namespace accl
