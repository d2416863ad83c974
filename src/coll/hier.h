// The hierarchical collectives (NCCL_ALGO token "hier") on H hosts of L
// ranks each: rings within a host (shared memory) and along each rail (the
// ranks at one place on every host, over their own NICs), made at the first
// hierarchical call. design.md, "Hierarchical collectives".
#pragma once

#include <memory>
#include <vector>

#include "coll/coll.h"
#include "core/comm.h"

namespace accl {

// The most scratch a hierarchical reducescatter holds: larger blocks go in pieces.
constexpr size_t kHierScratchBytes = 64 << 20;

struct Hier {
  int host = 0, place = 0;                   // this rank's host and its place there
  std::vector<int> places, hosts;            // blocks 0..L-1, 0..H-1
  std::vector<int> railRanks;                // the rail's ranks, host by host
  std::vector<std::vector<int>> hostRanks;   // each host's ranks, place by place
  Connection *localSend = nullptr, *localRecv = nullptr, *railSend = nullptr, *railRecv = nullptr;
  std::vector<char> scratch;                 // reducescatter: a piece of a block per host (at most kHierScratchBytes)
  // The ring within the host over `blocks`; along the rail over `blocks`.
  RingPath local(const std::vector<int>& blocks) const { return {&blocks, place, localSend, localRecv}; }
  RingPath rail(const std::vector<int>& blocks) const { return {&blocks, host, railSend, railRecv}; }
};

// The communicator's Hier, made at its first call (every rank at the same call).
ncclResult_t hierSetup(ncclComm* comm, Hier** out);

// A reducing call's start: the communicator's Hier, and the reducers of the
// two stages: within the host each input is prepared (PreMulSum's scalar)
// and summed unfinished; along the rail partial sums meet (no second
// scalar), and the result is finished once (an integer average divides by
// every rank).
ncclResult_t hierReducing(const CollArgs& a, const Reducer& red, Hier** h, Reducer* first, Reducer* across);

}  // namespace accl
