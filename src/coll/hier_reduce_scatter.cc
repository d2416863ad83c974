// Hierarchical reducescatter (coll/hier.h): host by host, the ranks of the
// host reduce-scatter that host's blocks, so that the rank at place i holds,
// for every host, the partial sum of the block of that host's rank at place
// i (in a scratch block per host); along the rail (each over its own NIC,
// all rails at once) the ranks at place i reduce-scatter those partial sums,
// each keeping its own block's.
#include "base/check.h"
#include "coll/hier.h"

namespace accl {

ncclResult_t hierReduceScatter(const CollArgs& a, const Reducer& red) {
  Hier* h = nullptr;
  Reducer first, across;
  NCCLCHECK(hierReducing(a, red, &h, &first, &across));
  const size_t blockBytes = a.count * typeSize(a.type);
  if (h->scratch.size() < h->hosts.size() * blockBytes) h->scratch.resize(h->hosts.size() * blockBytes);
  CollArgs part = a;
  for (size_t host = 0; host < h->hostRanks.size(); ++host) {
    part.recvbuff = h->scratch.data() + host * blockBytes;
    NCCLCHECK(ringReduceScatter(part, first, h->local(h->hostRanks[host])));
  }
  part.sendbuff = h->scratch.data();
  part.recvbuff = a.recvbuff;
  return ringReduceScatter(part, across, h->rail(h->hosts));
}

}  // namespace accl
