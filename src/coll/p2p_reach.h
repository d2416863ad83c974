// Which ranks this rank's pulled sends reach (coll/p2p.cc, "Pulled sends"):
// a rank of this process, or a rank of this host in another process where
// each of the two reaches the other's memory through cross memory attach
// (the receiver reads the sender's buffer, the sender writes into the
// receiver's).
#pragma once

#include "nccl.h"

struct ncclComm;

namespace accl {

// Communicator init, after hostDirectInit; collective where some host holds
// ranks of two processes and the direct collectives' setup did not already
// find every pair reachable (ranks on several hosts, ACCL_DIRECT=0 or
// NCCL_ALGO on a rank, a pair that cannot attach): each rank tries to attach
// to the other processes of its host, and one allgather of a bit per process
// of the busiest host (in 64-bit words) tells every rank which of its host's
// processes reached its own. Host mode only. Only a failing bootstrap is an
// error.
ncclResult_t p2pReachInit(ncclComm* comm);

// Rank k is of this host, in another process, and the two reach each other.
bool p2pReachesProcess(const ncclComm* comm, int k);

}  // namespace accl
