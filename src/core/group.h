// ncclGroupStart/ncclGroupEnd for the calling thread. Inside a group, inits,
// window registrations and operations are queued. The outermost ncclGroupEnd
// runs the inits concurrently, then the registrations, then, per
// communicator, its collectives in call order followed
// by all its sends and receives together (so they may pair up in any order).
// Several communicators run concurrently, one thread each, so ranks driven from
// one thread can meet each other. It returns the first error.
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
void groupEnqueueInit(std::function<ncclResult_t()> init);
// A collective call on one communicator other than an operation (window
// registration): run at the outermost ncclGroupEnd after the inits and before
// the operations, in call order per communicator, communicators concurrently.
void groupEnqueueCommJob(ncclComm* comm, std::function<ncclResult_t()> job);
// ncclInvalidUsage if the group would mix blocking and non-blocking communicators.
ncclResult_t groupEnqueueColl(const CollArgs& args);

}  // namespace accl
