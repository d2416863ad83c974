#include "coll/p2p_reach.h"

#include <cerrno>
#include <cstdint>
#include <map>
#include <vector>

#include "coll/cross_copy.h"
#include "coll/host_direct.h"
#include "core/check.h"
#include "core/comm.h"

namespace accl {
namespace {

// Two ranks of one process: the same key and pid (pids repeat across PID namespaces).
bool oneProcess(const PeerInfo& a, const PeerInfo& b) { return a.processKey == b.processKey && a.pid == b.pid; }

// A host holds at most this many ranks whose reach a word can say.
constexpr int kMaxLocal = 64;

}  // namespace

ncclResult_t p2pReachInit(ncclComm* comm) {
  const int n = comm->nranks, me = comm->rank;
  comm->p2pReach.assign(n, 0);
  const std::vector<PeerInfo>& peers = comm->peers;
  auto otherProcessHere = [&](int a, int b) {
    return a != b && peers[a].hostHash == peers[b].hostHash && !oneProcess(peers[a], peers[b]);
  };
  if (hostDirectAnyBuffer(comm)) {  // every pair reaches the other, as the direct collectives found
    for (int q = 0; q < n; ++q) comm->p2pReach[q] = otherProcessHere(me, q);
    return ncclSuccess;
  }
  if (comm->deviceMode || n < 2) return ncclSuccess;
  // Every rank decides alike from what all know: whether any host holds two processes.
  bool pairs = false;
  std::vector<int> local(n);  // a rank's place among the ranks of its host, in rank order
  std::map<uint64_t, int> perHost;
  for (int q = 0; q < n; ++q) {
    local[q] = perHost[peers[q].hostHash]++;
    for (int p = 0; p < q && !pairs; ++p) pairs = otherProcessHere(p, q);
  }
  if (!pairs) return ncclSuccess;
  // Bit i: this rank reads the memory of the rank at place i of its host.
  std::vector<uint64_t> reached(n, 0);
  const bool cma = paramInt(Param::Cma) != 0;
  for (int q = 0; q < n && cma; ++q)
    if (otherProcessHere(me, q) && local[q] < kMaxLocal &&
        crossReachable(localPid(comm, q), peers[q].reachProbe, peers[q].processKey))
      reached[me] |= uint64_t{1} << local[q];
  NCCLCHECK(comm->bootstrap->allgather(reached.data(), sizeof(uint64_t)));
  int count = 0, here = 0;
  for (int q = 0; q < n; ++q) {
    if (!otherProcessHere(me, q)) continue;
    ++here;
    comm->p2pReach[q] = local[q] < kMaxLocal && local[me] < kMaxLocal && (reached[me] >> local[q] & 1) &&
                        (reached[q] >> local[me] & 1);
    count += comm->p2pReach[q];
  }
  if (here > 0)
    INFO(kInit, "%s rank %d: sends straight between buffers reach %d of the %d ranks of this host in other "
         "processes (cross memory attach%s)", comm->name.c_str(), me, count, here,
         cma ? "; a pair must reach each other's memory, see ptrace's access rules" : " is off: ACCL_CMA=0");
  return ncclSuccess;
}

bool p2pReachesProcess(const ncclComm* comm, int k) {
  return static_cast<size_t>(k) < comm->p2pReach.size() && comm->p2pReach[k] != 0;
}

}  // namespace accl
