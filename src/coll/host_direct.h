// Direct collectives in host mode: when every rank of a communicator is on one
// host, each rank reduces (or copies) the part of the result it owns straight
// from every rank's input into every rank's output, as the CUDA executor's
// direct collectives do on one GPU (docs/design.md, "Direct collectives in
// host mode"). Every byte is then read and written once, where the ring moves
// it through connector slots: half the memory traffic.
//
// How a rank reaches another rank's buffer, best first:
//   - a rank of this process: at its address;
//   - a window registered with NCCL_WIN_COLL_SYMMETRIC on ncclMemAlloc memory
//     (a memfd, transport/host_share.h): mapped here at registration;
//   - any other buffer of another process: cross memory attach
//     (process_vm_readv/writev: one copy by the kernel, no mapping), when
//     every rank can attach to every other (probed at init; ptrace rules).
// Without cross memory attach, only calls whose buffers lie in such windows
// run direct (NCCL's symmetric contract makes every rank decide alike); the
// others take the ring.
//
// A call: every rank publishes its buffers (window and offset, or address)
// and call number in its slot, in a segment of POSIX shared memory all ranks
// map; waits until every rank published this call; moves its part; marks
// itself finished; and waits until every rank did, so that no rank returns
// while another still reads its input or writes its output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "coll/coll.h"
#include "core/handles.h"
#include "transport/host_share.h"

struct ncclWindow_vidmem;

namespace accl {

struct PeerInfo;

// Communicator init, collective. Before the peers' allgather each rank fills
// in what the others need to know (me->hostDirect, processKey, reachProbe).
// After it, when every rank is on this host and runs them: rank 0 makes the
// slots' segment, the others map it, every rank tries to attach to every
// other process, and all learn together whether the communicator runs
// direct collectives (comm->hostDirect) and whether on any buffer or only on
// symmetric windows. Only a failing bootstrap is an error: anything else
// leaves the collectives on the ring (INFO says why).
void hostDirectPrepare(ncclComm* comm, PeerInfo* me);
ncclResult_t hostDirectInit(ncclComm* comm);

// What a rank tells the others about its window in the registration's allgather.
struct HostDirectExport {
  HostShareRef share;  // where a peer process maps it (share.fd -1: it cannot)
  uint64_t addr;       // its address in its own process
  uint64_t bytes;
};
HostDirectExport hostDirectExport(const void* buff, size_t bytes);

// Registration of a window with NCCL_WIN_COLL_SYMMETRIC, collective, after
// the registration's allgather: maps every rank's window (win->hostPeerBase),
// and every rank learns whether all could (win->hostDirect). A failure only
// means that the window is reached as other buffers are; the result is an
// error only when the communicator's bootstrap fails.
ncclResult_t hostDirectAttach(ncclComm* comm, ncclWindow_vidmem* win, const std::vector<HostDirectExport>& all);
// Unmaps what hostDirectAttach mapped (deregistration, communicator teardown).
void hostDirectDetach(ncclWindow_vidmem* win);

// Every rank of the communicator is on this host and reaches every other's
// memory through cross memory attach (agreed at init).
bool hostDirectAnyBuffer(const ncclComm* comm);

// The communicator failed or is aborted: the other ranks leave their direct
// calls (and this rank's later ones fail at once). Any thread.
void hostDirectStop(ncclComm* comm);

// Runs `a` as a direct collective when its buffers allow it (*ran true), or
// leaves it to the ring (*ran false).
ncclResult_t hostDirectRun(const CollArgs& a, const Reducer& red, bool* ran);

}  // namespace accl
