// The rendezvous root: a thread, started by ncclGetUniqueId (or by rank 0 when
// NCCL_COMM_ID is set), that collects every rank's listener address and hands
// the full table back to each rank. It exits once done, or at ACCL_TIMEOUT.
#pragma once

#include <atomic>
#include <memory>

#include "bootstrap/wire.h"

namespace accl {

// Ends a root's wait for ranks early, which frees the listener's address:
// rank 0 of NCCL_COMM_ID raises `stop` once its own rendezvous is over, so
// that a failed init does not hold the fixed port until ACCL_TIMEOUT.
struct RootStop {
  std::atomic<uint32_t> stop{0};
  std::atomic<bool> exited{false};  // the root closed its sockets and left
};

// Takes ownership of listenFd. `stop` is optional.
ncclResult_t startRootThread(int listenFd, const uint8_t* secret, std::shared_ptr<RootStop> stop = nullptr);

}  // namespace accl
