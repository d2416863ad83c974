// The rendezvous root: a thread, started by ncclGetUniqueId (or by rank 0 when
// NCCL_COMM_ID is set), that collects every rank's listener address and hands
// the full table back to each rank. It exits once done, or at ACCL_TIMEOUT.
#pragma once

#include "bootstrap/wire.h"

namespace accl {

// Takes ownership of listenFd.
ncclResult_t startRootThread(int listenFd, const uint8_t* secret);

}  // namespace accl
