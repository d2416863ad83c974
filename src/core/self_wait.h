// One thread driving several ranks of one communicator without a group: its
// first blocking call waits for a rank that only this thread would ever
// call. NCCL hangs there; ACCL names the mistake. A wait for a rank of this
// process asks selfWaitStuck when it checks its peers.
#pragma once

#include <pthread.h>

#include "core/comm.h"

namespace accl {

// For the length of a call on `comm` by the calling thread (an ungrouped
// call, or a group's end for each communicator in the group): that thread
// drives it and is blocked in it.
class SelfWaitCall {
 public:
  explicit SelfWaitCall(ncclComm* comm) : comm_(comm) {
    const unsigned long me = pthread_self();
    comm->driver.store(me, std::memory_order_release);
    comm->caller.store(me, std::memory_order_release);
  }
  ~SelfWaitCall() { comm_->caller.store(0, std::memory_order_release); }
  SelfWaitCall(const SelfWaitCall&) = delete;
  SelfWaitCall& operator=(const SelfWaitCall&) = delete;

 private:
  ncclComm* comm_;
};

// An operation queued in a group: the calling thread drives `comm`.
inline void selfWaitIssued(ncclComm* comm) { comm->driver.store(pthread_self(), std::memory_order_release); }

// Why the call blocked on `comm` cannot get what it waits for from rank k,
// or nullptr. Rank k is stuck when it lives in this process, no call on it
// is under way, and the thread that drives it is the one blocked in this
// call: at once where no other thread of the process could take it over
// (every other thread is ACCL's own), else once that has lasted
// ACCL_SELF_WAIT_MS. Called by the waiting thread only.
const char* selfWaitStuck(ncclComm* comm, int k);

}  // namespace accl
