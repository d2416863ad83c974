// The communicator's connections as a set: every connection of the ring,
// the trees, point-to-point and one-sided calls, made on first use
// (getConnections), walked (forEachConnection), drained, stopped when the
// communicator fails, and taken out when it is freed.
#pragma once

#include <mutex>
#include <vector>

#include "core/comm.h"
#include "core/handles.h"
#include "transport/connection.h"
#include "nccl.h"

namespace accl {

// The communicator failed: every connection's FIFO aborts, which wakes this
// rank's waiters and tells the peers (their FIFO's abort flag and failed rank).
void abortConnections(ncclComm* comm);
// Waits until every send connection has put its data on the wire (sockets).
ncclResult_t commDrain(ncclComm* comm);
// Every connection of the communicator (ring, trees, point-to-point).
template <typename Fn>
void forEachConnection(ncclComm* comm, Fn fn) {
  // The list is taken under connMu and walked without it: fn may wait (drain)
  // for a proxy thread that itself reports an error through commSetError.
  // Connections are freed only by commFree (commTakeConnections), which waits
  // for walks that took them to end: a proxy that fails while the others'
  // connections are destroyed may still be walking them.
  std::vector<Connection*> all;
  {
    std::lock_guard<std::recursive_mutex> lock(comm->connMu);
    comm->connWalkers.fetch_add(1);
    if (comm->ring.send) all.push_back(comm->ring.send.get());
    if (comm->ring.recv) all.push_back(comm->ring.recv.get());
    for (auto& kv : comm->sendConns) all.push_back(kv.second.get());
    for (auto& kv : comm->recvConns) all.push_back(kv.second.get());
  }
  for (Connection* c : all) fn(c);
  comm->connWalkers.fetch_sub(1);
}
// Takes every connection out of the communicator (later walks find none) into
// *taken once no walk that found them is still under way; their destructors
// (which join proxy threads that may walk) run outside connMu. False (and
// nothing taken: the connections and the communicator must stay) when a walk
// is still under way after 10 s.
bool commTakeConnections(ncclComm* comm, std::vector<ConnPtr>* taken);
// The cached connections to/from `peers` for `tag`, making those that are missing
// (pairwise with each peer, which must ask for its side at the same time).
ncclResult_t getConnections(ncclComm* comm, const std::vector<int>& sendTo, const std::vector<int>& recvFrom,
                            int tag, std::vector<Connection*>* sends, std::vector<Connection*>* recvs);

}  // namespace accl
