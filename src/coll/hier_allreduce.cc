// Hierarchical allreduce for rail-optimised fabrics (NCCL_ALGO token
// "hier"): H hosts of L ranks each. A reduce-scatter among each host's ranks
// (shared memory) leaves rank i of a host with block i of the host's sum;
// an allreduce of block i among the ranks i of every host (a rail: each over
// its own NIC, so every NIC of a host carries its rank's share at once, and
// nothing crosses rails); an allgather within the host. The same bytes
// cross between hosts as in the flat ring, spread over all L ranks and NICs
// instead of the one rank where the ring leaves the host. Elements past the
// last whole block per rank (fewer than L) take the flat ring.
#include <algorithm>

#include "base/check.h"
#include "coll/coll.h"
#include "coll/tuner.h"
#include "core/comm.h"
#include "topo/topo.h"
#include "transport/connections.h"

namespace accl {

struct Hier {
  std::vector<int> localBlocks, railBlocks;  // a block per place: 0..L-1, 0..H-1
  RingPath local{}, rail{};
};

void HierDeleter::operator()(Hier* h) const { delete h; }

bool hierShape(const ncclComm* comm) {
  const Topology* t = comm->topo.get();
  if (!t || t->hosts.size() < 2) return false;
  const size_t local = t->hosts[0].ranks.size();
  return local >= 2 && std::all_of(t->hosts.begin(), t->hosts.end(),
                                   [&](const TopoHost& h) { return h.ranks.size() == local; });
}

namespace {

// The two rings, made at the first call (every rank makes them at the same
// call, so that the connections pair up): within the host, by place; along
// the rail, host by host (its connections take the sender's rail).
ncclResult_t hierSetup(ncclComm* comm) {
  if (comm->hier) return ncclSuccess;
  const Topology& t = *comm->topo;
  const int me = comm->rank, host = t.hostOf[me], place = t.localOf[me];
  const int L = static_cast<int>(t.hosts[host].ranks.size()), H = static_cast<int>(t.hosts.size());
  HierPtr h(new Hier());
  for (int i = 0; i < L; ++i) h->localBlocks.push_back(i);
  for (int i = 0; i < H; ++i) h->railBlocks.push_back(i);
  const std::vector<int>& mine = t.hosts[host].ranks;
  std::vector<Connection*> s, r;
  NCCLCHECK(getConnections(comm, {mine[(place + 1) % L]}, {mine[(place + L - 1) % L]}, kTagHierLocal, &s, &r));
  h->local = {&h->localBlocks, place, s[0], r[0]};
  NCCLCHECK(getConnections(comm, {t.hosts[(host + 1) % H].ranks[place]}, {t.hosts[(host + H - 1) % H].ranks[place]},
                           kTagHierRail, &s, &r));
  h->rail = {&h->railBlocks, host, s[0], r[0]};
  INFO(kColl, "%s rank %d: hierarchical allreduce: place %d of %d on host %d of %d; within the host to rank %d, "
       "along rail %d to rank %d", comm->name.c_str(), me, place, L, host, H, mine[(place + 1) % L], place,
       t.hosts[(host + 1) % H].ranks[place]);
  comm->hier = std::move(h);
  return ncclSuccess;
}

}  // namespace

ncclResult_t hierAllReduce(const CollArgs& a, const Reducer& red) {
  ncclComm* comm = a.comm;
  NCCLCHECK(hierSetup(comm));
  const Hier& h = *comm->hier;
  const size_t esize = typeSize(a.type);
  const size_t per = a.count / static_cast<size_t>(h.local.size()), whole = per * h.local.size();
  const char* src = static_cast<const char*>(a.sendbuff);
  char* dst = static_cast<char*>(a.recvbuff);
  char* block = dst + static_cast<size_t>(h.local.mine()) * per * esize;
  // Within the host each input is prepared (PreMulSum's scalar) and summed,
  // unfinished; along the rail partial sums meet (no second scalar), and the
  // result is finished once (an integer average divides by every rank).
  Reducer first = red, across = red;
  first.k.finish = nullptr;
  if (red.kind == OpKind::PreMulSum || red.kind == OpKind::SumPostDiv) {
    if (!hostKernels(a.type, OpKind::Sum, &across.k)) return ncclInternalError;
    across.k.finish = red.k.finish;
  }
  CollArgs part = a;
  part.count = per;
  part.recvbuff = block;
  NCCLCHECK(ringReduceScatter(part, first, h.local));
  part.sendbuff = block;
  NCCLCHECK(ringAllReduce(part, across, h.rail));
  part.recvbuff = dst;
  NCCLCHECK(ringAllGather(part, h.local));
  if (whole == a.count) return ncclSuccess;
  CollArgs rest = a;
  rest.count = a.count - whole;
  rest.sendbuff = src + whole * esize;
  rest.recvbuff = dst + whole * esize;
  return ringAllReduce(rest, red, commRing(comm));
}

}  // namespace accl
