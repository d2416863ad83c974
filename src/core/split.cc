#include "core/split.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"

namespace accl {
namespace {

struct SplitEntry {
  int32_t color, key, rank, pad;
  UniqueIdLayout id;  // filled by each color's first rank (its new rank 0)
};

}  // namespace

ncclResult_t commSplit(ncclComm* parent, int color, int key, ncclComm* child) {
  const int n = parent->nranks;
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
  // Second round: each color's leader publishes a fresh unique id.
  if (leader) NCCLCHECK(makeUniqueId(&all[parent->rank].id));
  NCCLCHECK(parent->bootstrap->allgather(all.data(), sizeof(SplitEntry)));
  if (color < 0 || !child) return ncclSuccess;
  int newRank = 0;
  while (group[newRank].rank != parent->rank) ++newRank;
  const UniqueIdLayout& id = all[group[0].rank].id;
  child->rank = newRank;
  child->nranks = static_cast<int>(group.size());
  INFO(kInit, "%s rank %d: split color %d key %d -> rank %d of %zu", parent->name.c_str(), parent->rank, color,
       key, newRank, group.size());
  return commInit(child, id, static_cast<int>(group.size()), newRank);
}

}  // namespace accl
