// ncclCommSplit: the ranks of a communicator regroup by color, ordered by key.
#pragma once

#include "core/comm.h"

namespace accl {

// Collective over `parent`: initialises `child` as this rank's part of the new
// communicator of its color. color < 0 (NCCL_SPLIT_NOCOLOR) takes part in the
// exchange only; child is then unused (may be NULL).
ncclResult_t commSplit(ncclComm* parent, int color, int key, ncclComm* child);

// ncclCommShrink: the parent's ranks except `excluded` (which do not take part:
// they may be dead) form `child`, in the parent's rank order. Uses only the
// parent's bootstrap, so it works after a revoke or a failure.
ncclResult_t commShrink(ncclComm* parent, const std::vector<int>& excluded, ncclComm* child);

// Stops what is in flight on `comm` (its connectors abort, so waits here and on
// the peers end with an error) without closing its bootstrap.
void commStopOperations(ncclComm* comm);

}  // namespace accl
