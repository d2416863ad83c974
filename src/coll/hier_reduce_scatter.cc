// Hierarchical reducescatter (coll/hier.h): host by host, the ranks of the
// host reduce-scatter that host's blocks, so that the rank at place i holds,
// for every host, the partial sum of the block of that host's rank at place
// i (in a scratch block per host); along the rail (each over its own NIC,
// all rails at once) the ranks at place i reduce-scatter those partial sums,
// each keeping its own block's.
#include <algorithm>

#include "base/check.h"
#include "coll/hier.h"

namespace accl {

ncclResult_t hierReduceScatter(const CollArgs& a, const Reducer& red) {
  Hier* h = nullptr;
  Reducer first, across;
  NCCLCHECK(hierReducing(a, red, &h, &first, &across));
  const size_t esize = typeSize(a.type), blockBytes = a.count * esize, hosts = h->hosts.size();
  // Pieces of every block at once, so that the scratch (a piece per host) stays bounded.
  const size_t piece = std::max<size_t>(1, std::min(a.count, kHierScratchBytes / hosts / esize));
  if (h->scratch.size() < hosts * piece * esize) h->scratch.resize(hosts * piece * esize);
  const char* src = static_cast<const char*>(a.sendbuff);
  char* dst = static_cast<char*>(a.recvbuff);
  for (size_t off = 0; off < a.count || off == 0; off += piece) {
    CollArgs part = a;
    part.count = std::min(piece, a.count - off);
    part.sendbuff = src + off * esize;  // block b's piece at b x blockBytes from here
    for (size_t host = 0; host < hosts; ++host) {
      part.recvbuff = h->scratch.data() + host * part.count * esize;
      RingPath local = h->local(h->hostRanks[host]);
      local.stride = blockBytes;
      NCCLCHECK(ringReduceScatter(part, first, local));
    }
    part.sendbuff = h->scratch.data();
    part.recvbuff = dst + off * esize;
    NCCLCHECK(ringReduceScatter(part, across, h->rail(h->hosts)));
    if (a.count == 0) break;
  }
  return ncclSuccess;
}

}  // namespace accl
