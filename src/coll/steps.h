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
  // driveSends: the caller waits with waitRecv/waitSend, so those waits may
  // move the frames it posts (see drive()); a progress engine that only
  // probes (p2p) leaves them to their proxies.
  Steps(ncclComm* comm, const char* opName, bool driveSends = true);
  ~Steps() { handOver(false); }
  Steps(const Steps&) = delete;
  Steps& operator=(const Steps&) = delete;

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
  // The connections this op waits on (and, when wholeOp_, posts to). A wait
  // drives them all (Connection::driving): it moves their frames, and their
  // proxies stand aside; it hands them over, waking the proxies, when it goes
  // to sleep and when it ends.
  // wholeOp_: a thread bound to one core keeps driving from its first post or
  // wait to the op's end (waking a proxy then only for frames still to send),
  // since a proxy on its core could only take turns with it; elsewhere the
  // proxies move frames while the rank computes.
  static constexpr int kMaxDriven = 16;  // a tree rank touches up to 10
  bool drive(Connection* c);  // false: the list is full, c stays with its proxy
  void awake();
  void handOver(bool sleeping);
  void progressAll();

  ncclComm* comm_;
  const char* op_;
  Deadline deadline_;
  uint64_t lastPeerCheck_;
  bool wholeOp_;
  bool awake_ = true;
  int nDriven_ = 0;
  Connection* driven_[kMaxDriven] = {};
};

}  // namespace accl
