// Runs a group's jobs at once. Each job may wait for another (the ranks one
// thread drives meet each other), so every job gets a thread of its own: the
// caller's for the first, pooled threads for the others. Pooled threads wait
// for work and are reused, so a grouped call does not start threads (tens of
// microseconds each).
#pragma once

#include <functional>
#include <vector>

#include "nccl.h"

namespace accl {

// Runs every job concurrently and returns the first error (in job order).
// Where the threads cannot be started, no job runs: ncclSystemError, a WARN,
// and *ran (when given) false.
ncclResult_t runConcurrently(const std::vector<std::function<ncclResult_t()>>& jobs, bool* ran = nullptr);

}  // namespace accl
