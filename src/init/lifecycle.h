// A communicator's life, above the layers it drives: made (commAlloc), set
// up (commInit: the bootstrap, the peers' exchange, the connections and every
// layer's state) and freed (commFree).
#pragma once

#include "bootstrap/wire.h"
#include "core/comm.h"
#include "nccl.h"

namespace accl {

// A new communicator, not yet registered or set up: its bootstrap made, and
// commSetError's reach into the layers set (ncclComm::stopLayers).
ncclComm* commAlloc();
// Full init of an allocated comm (bootstrap, peer exchange, transports).
ncclResult_t commInit(ncclComm* comm, const UniqueIdLayout& id, int nranks, int rank);
// Abort: flag, wake, wait for in-flight calls, free.
void commFree(ncclComm* comm);

}  // namespace accl
