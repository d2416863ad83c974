// The communicator's connections as a set: made on first use, drained,
// taken out at free, and stopped when the communicator fails.
#include "transport/connections.h"

#include <unistd.h>

#include <chrono>

#include "base/check.h"
#include "core/comm.h"
#include "transport/connection.h"

namespace accl {

void abortConnections(ncclComm* comm) {
  const int failed = comm->failedRank.load();
  forEachConnection(comm, [failed](Connection* c) { c->abort(failed); });
}

ncclResult_t commDrain(ncclComm* comm) {
  ncclResult_t first = ncclSuccess;
  forEachConnection(comm, [&](Connection* c) {
    if (!c->isSend) return;
    ncclResult_t r = c->drain();
    if (r != ncclSuccess && first == ncclSuccess) {
      WARN("%s (rank %d): could not flush data to rank %d", comm->name.c_str(), comm->rank, c->peer);
      first = r;
    }
  });
  return first;
}

ncclResult_t getConnections(ncclComm* comm, const std::vector<int>& sendTo, const std::vector<int>& recvFrom,
                            int tag, std::vector<Connection*>* sends, std::vector<Connection*>* recvs) {
  std::vector<int> newSends, newRecvs;
  {
    std::lock_guard<std::recursive_mutex> lock(comm->connMu);
    for (int p : sendTo)
      if (!comm->sendConns.count({p, tag})) newSends.push_back(p);
    for (int p : recvFrom)
      if (!comm->recvConns.count({p, tag})) newRecvs.push_back(p);
  }
  std::vector<ConnPtr> s, r;
  // Not under connMu: this waits for the peers, and an abort must get through meanwhile.
  if (!newSends.empty() || !newRecvs.empty()) NCCLCHECK(connectPeers(comm, newSends, newRecvs, tag, &s, &r));
  std::lock_guard<std::recursive_mutex> lock(comm->connMu);
  for (auto& c : s) comm->sendConns[{c->peer, tag}] = std::move(c);
  for (auto& c : r) comm->recvConns[{c->peer, tag}] = std::move(c);
  if (sends) {
    sends->clear();
    for (int p : sendTo) sends->push_back(comm->sendConns[{p, tag}].get());
  }
  if (recvs) {
    recvs->clear();
    for (int p : recvFrom) recvs->push_back(comm->recvConns[{p, tag}].get());
  }
  return ncclSuccess;
}

bool commTakeConnections(ncclComm* comm, std::vector<ConnPtr>* taken) {
  std::vector<ConnPtr>& all = *taken;
  {
    std::lock_guard<std::recursive_mutex> lock(comm->connMu);
    all.push_back(std::move(comm->ring.send));
    all.push_back(std::move(comm->ring.recv));
    for (auto& kv : comm->sendConns) all.push_back(std::move(kv.second));
    for (auto& kv : comm->recvConns) all.push_back(std::move(kv.second));
    comm->sendConns.clear();
    comm->recvConns.clear();
  }
  // A walk's fn does not wait for anything commFree holds (aborts store and
  // wake; drains come only from calls, which have left by now). Bounded all
  // the same: better a leak than a destroy that never returns.
  const auto by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (comm->connWalkers.load() > 0 && std::chrono::steady_clock::now() < by) usleep(50);
  if (comm->connWalkers.load() > 0) {  // the walker goes on to use the communicator too: it must stay
    WARN("%s (rank %d): a walk over its connections is still under way 10 s after they were taken out: the "
         "communicator is left allocated rather than freed under it", comm->name.c_str(), comm->rank);
    for (ConnPtr& c : all) (void)c.release();
    all.clear();
    return false;
  }
  return true;
}

}  // namespace accl
