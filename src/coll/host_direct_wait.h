// The direct collectives' wait for every rank's slot (coll/host_direct.cc),
// in a header of its own so that the unit tests drive it with a predicate
// that plays a peer.
#pragma once

#include <atomic>
#include <optional>

#include "base/debug.h"
#include "base/wait.h"
#include "coll/host_direct_state.h"
#include "core/comm.h"
#include "core/self_wait.h"
#include "transport/peer_life.h"

namespace accl {

// Until ready(slot k) for every rank k; a failed rank, abort, ACCL_TIMEOUT and
// a dead peer process end the wait with an error that names the rank.
// stopped: leave when a rank's slot says it stopped (not when waiting for
// the ranks to leave a failed call: a stopped rank may still be moving).
template <typename Ready>
inline ncclResult_t waitAll(ncclComm* comm, HostDirect& d, const char* op, const char* stage, Ready ready,
                     bool stopped = true) {
  // Made at the first check: a call whose peers are there already (small
  // calls, mostly) reads no clock.
  std::optional<Deadline> deadline;
  for (int k = 0; k < comm->nranks; ++k) {
    Backoff b;
    while (!ready(d.slots[k])) {
      b.pause();
      if (!b.checkNow() || ready(d.slots[k])) continue;  // a rank that got here decides for itself
      if (!deadline) deadline.emplace(&comm->abortFlag);
      // Stopped, unless it got here first: between the look above and this
      // one a rank may publish (or finish), return and destroy its
      // communicator, which sets `failed`. What ready() reads is stored
      // before `failed`, so once this acquire load sees `failed`, ready()
      // sees that too. (A rank that got here and then failed is judged after
      // the wait, with the inline "finished first" exemption.)
      if (stopped && d.slots[k].failed.load(std::memory_order_acquire) && !ready(d.slots[k])) {
        commNoteFailedRank(comm, k);
        WARN("%s (%s, rank %d): rank %d stopped (its direct collective failed, or its communicator failed, was "
             "aborted or destroyed)", op, comm->name.c_str(), comm->rank, k);
        return ncclRemoteError;
      }
      if (deadline->aborted()) return commAbortedResult(comm, op);
      if (deadline->expired()) {
        WARN("%s (%s, rank %d): timed out (ACCL_TIMEOUT=%lld s) waiting for rank %d %s the direct collective", op,
             comm->name.c_str(), comm->rank, static_cast<long long>(deadline->seconds()), k, stage);
        return ncclTimeout;
      }
      if (const char* why = b.napping() ? selfWaitStuck(comm, k) : nullptr) {
        WARN("%s (%s, rank %d): waiting for rank %d %s the direct collective %s", op, comm->name.c_str(), comm->rank,
             k, stage, why);
        return ncclInvalidUsage;
      }
      // A rank that got here, finished and left since the look above is not gone.
      const char* gone = b.napping() ? peerGone(comm, k) : nullptr;
      if (gone && !ready(d.slots[k])) {
        commNoteFailedRank(comm, k);
        WARN("%s (%s, rank %d): waiting for rank %d %s the direct collective: %s", op, comm->name.c_str(), comm->rank,
             k, stage, gone);
        return ncclRemoteError;
      }
    }
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return ncclSuccess;
}

}  // namespace accl
