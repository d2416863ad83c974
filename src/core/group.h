// ncclGroupStart/ncclGroupEnd for the calling thread. Inside a group, inits and
// collectives are queued; the outermost ncclGroupEnd runs the inits
// concurrently, then each communicator's collectives (one thread per
// communicator when there are several, so ranks driven from one thread can
// meet each other), and returns the first error.
#pragma once

#include <functional>

#include "coll/coll.h"

namespace accl {

bool groupActive();
ncclResult_t groupStart();
ncclResult_t groupEnd();
void groupEnqueueInit(std::function<ncclResult_t()> init);
void groupEnqueueColl(const CollArgs& args);

}  // namespace accl
