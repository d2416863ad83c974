// The benchmark procedure of one thread, as nccl-tests runs it: for every
// datatype, operator and root, warm up at the largest and smallest size, then
// for each size time the out-of-place and the in-place call, check them, and
// (thread 0 of process 0) print the row.
#pragma once

#include "core/rank_set.h"

namespace perf {

// Runs every test on this thread's ranks (already initialised).
void runBenchmark(Shared* s, RankSet* ranks);

}  // namespace perf
