#include "coll/tree.h"

#include "base/check.h"
#include "core/comm.h"
#include "transport/connection.h"
#include "transport/connections.h"

namespace accl {
namespace {

// A balanced binary tree over indices [0, n): each subtree's root is the middle of its range.
TreeLinks midTree(int n, int idx) {
  TreeLinks l;
  int lo = 0, hi = n, parent = -1;
  for (;;) {
    int mid = (lo + hi) / 2;
    if (idx == mid) {
      l.parent = parent;
      if (lo < mid) l.children[0] = (lo + mid) / 2;
      if (mid + 1 < hi) l.children[1] = (mid + 1 + hi) / 2;
      return l;
    }
    parent = mid;
    if (idx < mid) hi = mid;
    else lo = mid + 1;
  }
}

}  // namespace

TreeLinks treeLinks(int n, int rank, int t) {
  // Tree 1 is tree 0 with every index shifted by one: the leaves of a mid-split
  // tree sit at even indices, so shifting turns most of them into inner nodes.
  const int shift = t == 0 ? 0 : 1;
  auto toIdx = [&](int r) { return (r + shift) % n; };
  auto toRank = [&](int i) { return i < 0 ? -1 : (i - shift + n) % n; };
  TreeLinks idx = midTree(n, toIdx(rank));
  TreeLinks out;
  out.parent = toRank(idx.parent);
  out.children[0] = toRank(idx.children[0]);
  out.children[1] = toRank(idx.children[1]);
  return out;
}

ncclResult_t setupTrees(ncclComm* comm) {
  if (comm->treesReady) return ncclSuccess;
  for (int t = 0; t < 2; ++t) {
    TreeLinks l = treeLinks(comm->nranks, comm->rank, t);
    Tree& tree = comm->trees[t];
    tree.parent = l.parent;
    tree.children[0] = l.children[0];
    tree.children[1] = l.children[1];
    std::vector<int> sendTo, recvFrom;
    if (l.parent >= 0) {
      sendTo.push_back(l.parent);
      recvFrom.push_back(l.parent);
    }
    for (int c : l.children)
      if (c >= 0) {
        sendTo.push_back(c);
        recvFrom.push_back(c);
      }
    const int tag = t == 0 ? kTagTree0 : kTagTree1;
    std::vector<Connection*> sends, recvs;
    NCCLCHECK(getConnections(comm, sendTo, recvFrom, tag, &sends, &recvs));
    size_t i = 0;
    if (l.parent >= 0) {
      tree.up = sends[0];
      tree.fromParent = recvs[0];
      i = 1;
    }
    for (int k = 0; k < 2; ++k)
      if (l.children[k] >= 0) {
        tree.down[k] = sends[i];
        tree.fromChild[k] = recvs[i];
        ++i;
      }
  }
  comm->treesReady = true;
  return ncclSuccess;
}

}  // namespace accl
