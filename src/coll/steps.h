// The waits every algorithm is made of, on any connection: wait for a posted
// slot (receive side) or a free slot (send side), post, release. Waiting is
// bounded: abort flag, the peer's failure, peer liveness and the deadline are
// checked; a failed wait names this rank, the peer, the transport and the
// operation, marks the communicator failed and wakes its peers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "base/wait.h"
#include "transport/connection.h"

struct ncclComm;

namespace accl {

class Steps {
 public:
  // driveSends: the caller waits with waitRecv/waitSend, so those waits may
  // move the frames it posts (see drive()); a progress engine that only
  // probes (p2p) moves them itself (its Driver).
  Steps(ncclComm* comm, const char* opName, bool driveSends = true);
  ~Steps();
  Steps(const Steps&) = delete;
  Steps& operator=(const Steps&) = delete;

  // Blocking: until the next slot of `c` holds exactly `bytes` / is free.
  ncclResult_t waitRecv(Connection* c, size_t bytes, const char** data);
  ncclResult_t waitSend(Connection* c, char** slot);
  // Non-blocking probes for progress engines (then call check() when nothing moved).
  bool recvReady(Connection* c) const {
    return c->fifo.ctrl->tail.load(std::memory_order_acquire) > c->step;
  }
  // Reads head only when the last value read leaves no slot free: the
  // receiver writes it after every slot, and each read takes its cache line
  // from the receiver's core.
  bool sendReady(Connection* c) const {
    if (c->step - c->seenHead < kSlots) return true;
    c->seenHead = c->fifo.ctrl->head.load(std::memory_order_acquire);
    return c->step - c->seenHead < kSlots;
  }
  // The size of the next posted slot (after recvReady) and a check that it is `bytes`.
  ncclResult_t recvSlot(Connection* c, size_t bytes, const char** data);
  void post(Connection* c, size_t bytes);
  // Posts the next slot of `c` (once free) with `bytes` of the caller's
  // memory at `data` as its payload, copying nothing, where
  // c->sendsFromMemory() (false: nothing posted; copy into the slot and
  // post). That memory must stay as it is until waitSent covers the slot;
  // an operation that ends first (an error) has the connection drop those
  // frames (Connection::abandonFrom).
  bool postFrom(Connection* c, const void* data, size_t bytes);
  // Blocking: until every frame of `c` before step `upTo` has left.
  ncclResult_t waitSent(Connection* c, uint64_t upTo);
  // Blocking: until every frame postFrom posted has left.
  ncclResult_t waitAllSent();
  void release(Connection* c);
  // The slow-path checks of a wait on `c` (abort, peer failure, peer alive, deadline).
  ncclResult_t check(Connection* c);
  // The same checks for a wait that the FIFO's counters do not settle: a
  // pulled message (coll/p2p.cc), whose frame is there while the sender's
  // part of the copy is still to come.
  ncclResult_t checkPulled(Connection* c);
  // Whether the communicator was aborted, looked at on every wait (and every
  // pass of a progress engine): data that keeps moving never reaches check(),
  // and an abort must not wait for a long transfer to end.
  ncclResult_t checkAbort() const;
  // Something moved: the next stall gets a whole ACCL_TIMEOUT again (it bounds
  // each wait for a peer, not an operation that keeps moving).
  void progressed() { deadline_.reset(); }
  ncclResult_t fail(Connection* c, ncclResult_t err, const char* why);
  // The peer of `c` is gone (`gone`: peerGone's words): it is the failed rank,
  // and the wait fails with ncclRemoteError.
  ncclResult_t failGone(Connection* c, const char* gone);

 private:
  // A wait drives (Connection::driving) the connection it waits on while it
  // spins: it moves the frames, and the proxy stands aside; it hands over
  // when it goes to sleep (waking the proxy) and when it ends. Elsewhere the
  // proxies move frames while the rank computes.
  // wholeOp_ (a thread bound to one core, where a proxy could only take
  // turns with it): every connection the op posts to or waits on is driven
  // from the first post or wait to the op's end, and every wait moves them
  // all; it hands them over when it sleeps, and at the end (waking a proxy
  // then only for frames still to send).
  static constexpr int kMaxDriven = 16;  // a tree rank touches up to 10
  bool drive(Connection* c);  // false: the list is full, c stays with its proxy
  void awake();
  void handOver(bool sleeping);
  void progressAll();
  void spin(Connection* c, bool listed, bool* on);   // one spin of a wait on c
  void rest(Connection* c, bool* on, bool sleeping);  // the wait sleeps, or ends
  // One wait's driving, ended on every way out of the wait.
  struct Wait {
    Wait(Steps* s, Connection* c) : steps(s), conn(c), listed(s->wholeOp_ && s->drive(c)) {}
    ~Wait() { steps->rest(conn, &on, false); }
    Wait(const Wait&) = delete;
    Wait& operator=(const Wait&) = delete;
    void spin() { steps->spin(conn, listed, &on); }
    void sleep() { steps->rest(conn, &on, true); }
    Steps* steps;
    Connection* conn;
    bool listed;
    bool on = false;
  };

  void publish(Connection* c, size_t bytes);
  // check()'s part after the abort flags: the peer's liveness and the deadline.
  template <typename Settled>
  ncclResult_t checkPeer(Connection* c, Settled settled);

  ncclComm* comm_;
  const char* op_;
  int nSentFrom_ = 0;
  Connection* sentFrom_[kMaxDriven] = {};  // the connections postFrom posted to
  std::optional<Deadline> deadline_;  // from the first check() since the last progress
  uint64_t lastPeerCheck_ = 0;
  bool ownCore_;
  bool wholeOp_;
  bool awake_ = true;
  int nDriven_ = 0;
  Connection* driven_[kMaxDriven] = {};
};

}  // namespace accl
