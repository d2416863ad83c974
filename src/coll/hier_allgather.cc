// Hierarchical allgather (coll/hier.h): along the rail each rank gathers the
// blocks of the ranks at its place on every host (each over its own NIC,
// all rails at once), straight into their places in the output; then, host
// by host, the ranks of the host gather each other's. A block crosses
// between two hosts once per rail instead of (n-1) blocks through the one
// rank where the flat ring leaves the host.
#include "base/check.h"
#include "coll/hier.h"

namespace accl {

ncclResult_t hierAllGather(const CollArgs& a) {
  Hier* h = nullptr;
  NCCLCHECK(hierSetup(a.comm, &h));
  NCCLCHECK(ringAllGather(a, h->rail(h->railRanks)));
  const size_t blockBytes = a.count * typeSize(a.type);
  char* dst = static_cast<char*>(a.recvbuff);
  CollArgs part = a;
  for (const std::vector<int>& ranks : h->hostRanks) {  // its own block of that host is here now
    part.sendbuff = dst + static_cast<size_t>(ranks[h->place]) * blockBytes;
    NCCLCHECK(ringAllGather(part, h->local(ranks)));
  }
  return ncclSuccess;
}

}  // namespace accl
