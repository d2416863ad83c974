// The waits every algorithm is made of, on any connection: wait for a posted
// slot (receive side) or a free slot (send side), post, release. Waiting is
// bounded: abort flag, the peer's failure, peer liveness and the deadline are
// checked; a failed wait names this rank, the peer, the transport and the
// operation, marks the communicator failed and wakes its peers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/wait.h"
#include "transport/connection.h"

struct ncclComm;

namespace accl {

class Steps {
 public:
  Steps(ncclComm* comm, const char* opName);

  // Blocking: until the next slot of `c` holds exactly `bytes` / is free.
  ncclResult_t waitRecv(Connection* c, size_t bytes, const char** data);
  ncclResult_t waitSend(Connection* c, char** slot);
  // Non-blocking probes for progress engines (then call check() when nothing moved).
  bool recvReady(Connection* c) const {
    return c->fifo.ctrl->tail.load(std::memory_order_acquire) > c->step;
  }
  bool sendReady(Connection* c) const {
    return c->step - c->fifo.ctrl->head.load(std::memory_order_acquire) < kSlots;
  }
  // The size of the next posted slot (after recvReady) and a check that it is `bytes`.
  ncclResult_t recvSlot(Connection* c, size_t bytes, const char** data);
  void post(Connection* c, size_t bytes);
  void release(Connection* c);
  // The slow-path checks of a wait on `c` (abort, peer failure, peer alive, deadline).
  ncclResult_t check(Connection* c);
  ncclResult_t fail(Connection* c, ncclResult_t err, const char* why);

 private:
  ncclComm* comm_;
  const char* op_;
  Deadline deadline_;
  uint64_t lastPeerCheck_;
};

}  // namespace accl
