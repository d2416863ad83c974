// A communicator's topology, made at init where its ranks are on several hosts.
#pragma once

#include "nccl.h"

struct ncclComm;

namespace accl {

// Every rank's NICs (one allgather), then comm->topo: the same on every rank.
ncclResult_t topoSetup(ncclComm* comm);

}  // namespace accl
