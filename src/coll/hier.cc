// The hierarchical collectives' rings (coll/hier.h).
#include "coll/hier.h"

#include <algorithm>

#include "base/check.h"
#include "coll/tuner.h"
#include "topo/topo.h"
#include "transport/connections.h"

namespace accl {

void HierDeleter::operator()(Hier* h) const { delete h; }

bool hierShape(const ncclComm* comm) {
  const Topology* t = comm->topo.get();
  if (!t || t->hosts.size() < 2) return false;
  const size_t local = t->hosts[0].ranks.size();
  return local >= 2 && std::all_of(t->hosts.begin(), t->hosts.end(),
                                   [&](const TopoHost& h) { return h.ranks.size() == local; });
}

ncclResult_t hierSetup(ncclComm* comm, Hier** out) {
  if (!comm->hier) {
    const Topology& t = *comm->topo;
    HierPtr h(new Hier());
    h->host = t.hostOf[comm->rank];
    h->place = t.localOf[comm->rank];
    const int L = static_cast<int>(t.hosts[h->host].ranks.size()), H = static_cast<int>(t.hosts.size());
    for (int i = 0; i < L; ++i) h->places.push_back(i);
    for (int i = 0; i < H; ++i) h->hosts.push_back(i);
    for (const TopoHost& th : t.hosts) {
      h->railRanks.push_back(th.ranks[h->place]);
      h->hostRanks.push_back(th.ranks);
    }
    const std::vector<int>& mine = t.hosts[h->host].ranks;
    const int next = mine[(h->place + 1) % L], prev = mine[(h->place + L - 1) % L];
    const int railNext = h->railRanks[(h->host + 1) % H], railPrev = h->railRanks[(h->host + H - 1) % H];
    std::vector<Connection*> s, r;
    NCCLCHECK(getConnections(comm, {next}, {prev}, kTagHierLocal, &s, &r));
    h->localSend = s[0];
    h->localRecv = r[0];
    NCCLCHECK(getConnections(comm, {railNext}, {railPrev}, kTagHierRail, &s, &r));
    h->railSend = s[0];
    h->railRecv = r[0];
    INFO(kColl, "%s rank %d: hierarchical collectives: place %d of %d on host %d of %d; within the host to rank %d, "
         "along rail %d to rank %d", comm->name.c_str(), comm->rank, h->place, L, h->host, H, next, h->place,
         railNext);
    comm->hier = std::move(h);
  }
  *out = comm->hier.get();
  return ncclSuccess;
}

ncclResult_t hierReducing(const CollArgs& a, const Reducer& red, Hier** h, Reducer* first, Reducer* across) {
  NCCLCHECK(hierSetup(a.comm, h));
  *first = *across = red;
  first->k.finish = nullptr;
  if (red.kind == OpKind::PreMulSum || red.kind == OpKind::SumPostDiv) {
    if (!hostKernels(a.type, OpKind::Sum, &across->k)) return ncclInternalError;
    across->k.finish = red.k.finish;
  }
  return ncclSuccess;
}

}  // namespace accl
