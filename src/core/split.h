// ncclCommSplit: the ranks of a communicator regroup by color, ordered by key.
#pragma once

#include "core/comm.h"

namespace accl {

// Collective over `parent`: initialises `child` as this rank's part of the new
// communicator of its color. color < 0 (NCCL_SPLIT_NOCOLOR) takes part in the
// exchange only; child is then unused (may be NULL).
ncclResult_t commSplit(ncclComm* parent, int color, int key, ncclComm* child);

}  // namespace accl
