// The double binary tree: two binary trees over the ranks such that a rank
// that is a leaf in one is, where possible, an inner node in the other, so
// both trees together use every rank's links evenly. Each tree carries half
// of an allreduce.
#pragma once

#include "nccl.h"

struct ncclComm;

namespace accl {

struct TreeLinks {
  int parent = -1;
  int children[2] = {-1, -1};
};

// In tree t (0 or 1) of n ranks: this rank's parent and children.
TreeLinks treeLinks(int n, int rank, int t);
// Fills comm->trees and makes their connections (collective: every rank calls it).
ncclResult_t setupTrees(ncclComm* comm);

}  // namespace accl
