// Direct collectives in host mode: when every rank of a communicator is on one
// host and a collective's buffers lie in windows registered with
// NCCL_WIN_COLL_SYMMETRIC, each rank reduces (or copies) the part of the
// result it owns straight from every rank's input into every rank's output,
// as the CUDA executor's direct collectives do on one GPU (docs/design.md,
// "Direct collectives"). Every byte is then read and written once, where the
// ring moves it through connector slots: half the memory traffic.
//
// Ranks of one process reach each other's windows as they are; ranks of other
// processes map them, which needs the memory to be ncclMemAlloc's (a memfd,
// transport/host_share.h). A window that some rank cannot map is registered
// as usual and its collectives take the ring.
//
// A call: every rank publishes its buffers (window and offset) and call number
// in its slot, in a segment of POSIX shared memory all ranks map; waits until
// every rank published this call; moves its part; marks itself finished; and
// waits until every rank did, so that no rank returns while another still
// reads its input or writes its output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "coll/coll.h"
#include "transport/host_share.h"

struct ncclWindow_vidmem;

namespace accl {

class HostDirect;
struct HostDirectDeleter {
  void operator()(HostDirect* d) const;
};
using HostDirectPtr = std::unique_ptr<HostDirect, HostDirectDeleter>;

// What a rank tells the others about its window in the registration's allgather.
struct HostDirectExport {
  HostShareRef share;  // where a peer process maps it (share.fd -1: it cannot)
  uint64_t addr;       // its address in its own process
  uint64_t bytes;
};
HostDirectExport hostDirectExport(const void* buff, size_t bytes);

// Registration of a window with NCCL_WIN_COLL_SYMMETRIC, collective. Before
// the registration's allgather: rank 0 makes the slots' segment on first use.
void hostDirectPrepare(ncclComm* comm, HostDirectPtr* state);
// After it: maps every rank's window (win->hostPeerBase), and every rank
// learns whether all could (win->hostDirect). A failure only keeps the
// window's collectives on the ring; the result is an error only when the
// communicator's bootstrap fails.
ncclResult_t hostDirectAttach(ncclComm* comm, HostDirectPtr* state, ncclWindow_vidmem* win,
                              const std::vector<HostDirectExport>& all);
// Unmaps what hostDirectAttach mapped (deregistration, communicator teardown).
void hostDirectDetach(ncclWindow_vidmem* win);

// The communicator failed or is aborted: the other ranks leave their direct
// calls (and this rank's later ones fail at once). Any thread.
void hostDirectStop(ncclComm* comm);

// Runs `a` as a direct collective when its buffers allow it (*ran true), or
// leaves it to the ring (*ran false).
ncclResult_t hostDirectRun(const CollArgs& a, const Reducer& red, bool* ran);

}  // namespace accl
