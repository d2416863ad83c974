// ncclGroupStart/ncclGroupEnd for the calling thread. Inside a group, inits,
// window registrations and operations are queued. The outermost ncclGroupEnd
// runs the inits concurrently, then the registrations, then, per
// communicator, its collectives in call order followed
// by all its sends and receives together (so they may pair up in any order).
// Several communicators run concurrently, one thread each, so ranks driven from
// one thread can meet each other. It returns the first error.
//
// As NCCL's: a call that fails inside a group (bad arguments, an init that
// cannot start) fails the whole group. The outermost ncclGroupEnd then runs
// nothing queued in it, marks its queued inits failed (their communicators
// report the error through ncclCommGetAsyncError; destroy or abort them), and
// returns that first error.
#pragma once

#include <functional>

#include "coll/coll.h"

namespace accl {

bool groupActive();
ncclResult_t groupStart();
ncclResult_t groupEnd();
// Ends the group without running it, and predicts its time (ncclGroupSimulateEnd).
ncclResult_t groupSimulateEnd(ncclSimInfo_t* info);
// Ends the group without running anything (an error while queueing).
void groupDiscard();
// Drops what the calling thread's open group queued on `comm`, which is being
// destroyed or aborted: its operations, window calls, and the splits and
// shrinks made from it (their children fail through their cancel). Its own
// init is the communicator's business (api/init_api.cc). Returns how many.
int groupForget(const ncclComm* comm);
// Records r, if it is an error and the calling thread is inside a group, as
// the group's (the first one counts); returns r.
ncclResult_t groupFail(ncclResult_t r);
// `cancel`, if given, runs instead of `init` when the group failed, with its
// error; `parent`: the communicator the init is made from (split, shrink);
// `made`: the one it makes (NULL for a split rank of no colour), which must
// be blocking as the group's others are, or not (else ncclInvalidUsage, a
// WARN naming `fn`, and the group fails).
ncclResult_t groupEnqueueInit(std::function<ncclResult_t()> init, std::function<void(ncclResult_t)> cancel = {},
                              const ncclComm* parent = nullptr, const ncclComm* made = nullptr,
                              const char* fn = "ncclGroupEnd");
// A collective call on one communicator other than an operation (window
// registration): run at the outermost ncclGroupEnd after the inits and before
// the operations, in call order per communicator, communicators concurrently.
void groupEnqueueCommJob(ncclComm* comm, std::function<ncclResult_t()> job);
// ncclInvalidUsage if the group would mix blocking and non-blocking communicators.
ncclResult_t groupEnqueueColl(const CollArgs& args);

}  // namespace accl
