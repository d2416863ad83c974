#include "init/split.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <unistd.h>

#include "base/check.h"
#include "base/wait.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "coll/dev_comm.h"
#include "coll/host_direct.h"
#include "init/lifecycle.h"
#include "transport/connection.h"
#include "transport/connections.h"

namespace accl {
namespace {

struct SplitEntry {
  int32_t color, key, rank;
  int32_t failed;  // a color's first rank could not make its id (its WARN says why)
  SealedId id;     // filled by each color's first rank (its new rank 0)
};

// A child's id, sealed with the parent's secret for its context (bootstrap/wire.h).
ncclResult_t makeSealedId(ncclComm* parent, const IdContext& ctx, SealedId* out) {
  UniqueIdLayout id;
  NCCLCHECK(makeUniqueId(&id, false));
  return sealId(parent->bootstrap->secret(), ctx, id, out);
}
ncclResult_t openSealedId(ncclComm* parent, const IdContext& ctx, const SealedId& in, const char* op,
                          UniqueIdLayout* out) {
  if (openId(parent->bootstrap->secret(), ctx, in, out)) return ncclSuccess;
  WARN("%s (%s, rank %d): the new communicator's unique id from rank %d does not verify: it was altered or "
       "swapped on the way", op, parent->name.c_str(), parent->rank, ctx.from);
  return ncclSystemError;
}

}  // namespace

ncclResult_t commSplit(ncclComm* parent, int color, int key, ncclComm* child) {
  const int n = parent->nranks;
  const uint32_t seq = parent->splitCount++;
  std::vector<SplitEntry> all(n);
  SplitEntry& me = all[parent->rank];
  memset(&me, 0, sizeof(me));
  me.color = color;
  me.key = key;
  me.rank = parent->rank;
  NCCLCHECK(parent->bootstrap->allgather(all.data(), sizeof(SplitEntry)));

  std::vector<SplitEntry> group;
  for (const SplitEntry& e : all)
    if (color >= 0 && e.color == color) group.push_back(e);
  std::stable_sort(group.begin(), group.end(), [](const SplitEntry& a, const SplitEntry& b) {
    return a.key != b.key ? a.key < b.key : a.rank < b.rank;
  });
  const bool leader = !group.empty() && group[0].rank == parent->rank;
  const IdContext ctx{parent->commHash, kIdSplit, seq, group.empty() ? -1 : group[0].rank, color};
  // Second round: each color's leader publishes a fresh unique id. One that
  // cannot still takes part, so that no rank waits for it.
  const ncclResult_t made = leader ? makeSealedId(parent, ctx, &all[parent->rank].id) : ncclSuccess;
  all[parent->rank].failed = made != ncclSuccess;
  NCCLCHECK(parent->bootstrap->allgather(all.data(), sizeof(SplitEntry)));
  NCCLCHECK(made);
  if (color < 0 || !child) return ncclSuccess;
  if (all[group[0].rank].failed) {
    WARN("ncclCommSplit (%s, rank %d): rank %d, the new communicator's first, could not make its unique id (its "
         "WARN says why)", parent->name.c_str(), parent->rank, group[0].rank);
    return ncclSystemError;
  }
  int newRank = 0;
  while (group[newRank].rank != parent->rank) ++newRank;
  UniqueIdLayout id;
  NCCLCHECK(openSealedId(parent, ctx, all[group[0].rank].id, "ncclCommSplit", &id));
  child->rank = newRank;
  child->nranks = static_cast<int>(group.size());
  INFO(kInit, "%s rank %d: split color %d key %d -> rank %d of %zu", parent->name.c_str(), parent->rank, color,
       key, newRank, group.size());
  return commInit(child, id, static_cast<int>(group.size()), newRank);
}

ncclResult_t commShrink(ncclComm* parent, const std::vector<int>& excluded, ncclComm* child) {
  std::vector<int> keep;
  for (int r = 0; r < parent->nranks; ++r)
    if (std::find(excluded.begin(), excluded.end(), r) == excluded.end()) keep.push_back(r);
  const int newRank = static_cast<int>(std::find(keep.begin(), keep.end(), parent->rank) - keep.begin());
  const int tag = parent->shrinkCount++;
  // The first remaining rank makes the id and hands it to each of the others
  // over a fresh authenticated connection of the parent's bootstrap.
  SealedId sealed;
  const IdContext ctx{parent->commHash, kIdShrink, static_cast<uint32_t>(tag), keep[0], 0};
  Deadline dl(&parent->abortFlag);
  if (newRank == 0) {
    NCCLCHECK(makeSealedId(parent, ctx, &sealed));
    for (size_t i = 1; i < keep.size(); ++i) {
      int fd = -1;
      NCCLCHECK(parent->bootstrap->connectPeer(keep[i], Purpose::Shrink, tag, &fd));
      ncclResult_t r = socketSend(fd, &sealed, sizeof(sealed), dl);
      close(fd);
      NCCLCHECK(r);
    }
  } else {
    int fd = -1;
    NCCLCHECK(parent->bootstrap->acceptPeer(keep[0], Purpose::Shrink, tag, &fd));
    ncclResult_t r = socketRecv(fd, &sealed, sizeof(sealed), dl);
    close(fd);
    NCCLCHECK(r);
  }
  UniqueIdLayout id;
  NCCLCHECK(openSealedId(parent, ctx, sealed, "ncclCommShrink", &id));
  child->rank = newRank;
  child->nranks = static_cast<int>(keep.size());
  INFO(kInit, "%s rank %d: shrink without %zu rank(s) -> rank %d of %zu", parent->name.c_str(), parent->rank,
       excluded.size(), newRank, keep.size());
  return commInit(child, id, child->nranks, newRank);
}

void commStopOperations(ncclComm* comm) {
  int cause = comm->failedRank.load() >= 0 ? comm->failedRank.load() : comm->rank;
  forEachConnection(comm, [cause](Connection* c) { c->abort(cause); });
  devStopKernels(comm);
  hostDirectStop(comm);
}

}  // namespace accl
