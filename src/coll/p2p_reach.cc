#include "coll/p2p_reach.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "base/check.h"
#include "base/param.h"
#include "bootstrap/bootstrap.h"
#include "coll/cross_copy.h"
#include "coll/host_direct.h"
#include "core/comm.h"

namespace accl {

ncclResult_t p2pReachInit(ncclComm* comm) {
  const int n = comm->nranks, me = comm->rank;
  comm->p2pReach.assign(n, 0);
  const std::vector<PeerInfo>& peers = comm->peers;
  auto otherProcessHere = [&](int q) {  // rank q is of this host, in another process
    return q != me && peers[q].hostHash == peers[me].hostHash && !sameProcess(comm, q);
  };
  if (hostDirectAnyBuffer(comm)) {  // every pair reaches the other, as the direct collectives found
    for (int q = 0; q < n; ++q) comm->p2pReach[q] = otherProcessHere(q);
    return ncclSuccess;
  }
  if (comm->deviceMode || n < 2) return ncclSuccess;
  // Each rank's process, numbered among its host's processes in rank order
  // (reach is the process's: its ranks share one address space).
  std::map<uint64_t, int> procsOnHost;
  std::map<std::tuple<uint64_t, uint64_t, int32_t>, int> number;
  std::vector<int> proc(n);
  int most = 0;
  for (int q = 0; q < n; ++q) {
    const PeerInfo& p = peers[q];
    const auto key = std::make_tuple(p.hostHash, p.processKey, p.pid);
    auto it = number.find(key);
    if (it == number.end()) it = number.emplace(key, procsOnHost[p.hostHash]++).first;
    proc[q] = it->second;
    most = std::max(most, procsOnHost[p.hostHash]);
  }
  if (most < 2) return ncclSuccess;  // no host holds two processes: every rank finds the same
  // Bit j of a rank's words: it reads the memory of process j of its host.
  const size_t words = (static_cast<size_t>(most) + 63) / 64;
  std::vector<uint64_t> reached(static_cast<size_t>(n) * words, 0);
  uint64_t* mine = &reached[static_cast<size_t>(me) * words];
  const bool cma = paramInt(Param::Cma) != 0;
  std::vector<bool> tried(static_cast<size_t>(most));
  for (int q = 0; q < n && cma; ++q) {
    const int j = proc[q];
    if (!otherProcessHere(q) || tried[j]) continue;  // one try per process
    tried[j] = true;
    if (crossReachable(localPid(comm, q), peers[q].reachProbe, peers[q].processKey))
      mine[j / 64] |= uint64_t{1} << (j % 64);
  }
  NCCLCHECK(comm->bootstrap->allgather(reached.data(), words * sizeof(uint64_t)));
  auto reads = [&](int a, int b) {  // rank a reads rank b's process
    return reached[static_cast<size_t>(a) * words + proc[b] / 64] >> (proc[b] % 64) & 1;
  };
  int count = 0, here = 0;
  for (int q = 0; q < n; ++q) {
    if (!otherProcessHere(q)) continue;
    ++here;
    comm->p2pReach[q] = reads(me, q) && reads(q, me);
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
