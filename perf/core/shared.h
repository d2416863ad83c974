// State shared by all threads of a driver process, and the fatal-error path.
//
// Errors: every failure names the rank and the call and ends the run at once
// (all processes, through MPI_Abort under MPI): a rank that stops would leave
// its peers blocked. Refusals of a datatype or operator (ncclInvalidUsage, or
// ncclInvalidArgument, on a test's first call) are not failures with -d all /
// -o all: that test is skipped.
#pragma once

#include <string>
#include <vector>

#include "core/collective.h"
#include "core/options.h"
#include "core/report.h"
#include "core/world.h"
#include "nccl.h"

namespace perf {

struct Shared {
  const Collective* coll = nullptr;
  Options opts;
  World* world = nullptr;
  Team* team = nullptr;
  Report* report = nullptr;  // process 0 only
  ncclUniqueId id;
  int nranks = 0;
  int localDeviceBase = 0;                // first CUDA device of this process's ranks
  std::vector<std::string> deviceLines;   // one entry per thread
  // Written by thread 0 (identical in every process): results for the footer.
  int failedParts = 0;
  double busbwSum = 0;
  int busbwCount = 0;
  int skippedTests = 0;
  int testsRun = 0;
};

// "<program>: rank R: <call> failed: <error string> (<last error>)", then exit 1.
[[noreturn]] void failCall(const Shared& s, int rank, const char* call, ncclResult_t r, ncclComm_t comm);
// "<program>: rank R: <what>", then exit 1.
[[noreturn]] void failRank(const Shared& s, int rank, const std::string& what);
// The library's last error for comm, "" when none.
std::string lastError(ncclComm_t comm);

}  // namespace perf
