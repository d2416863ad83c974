// Whether a rank of this host is still there where its pid cannot say: a
// rank in another PID namespace (containers that share /dev/shm but not
// their pids). Each such rank holds a POSIX record lock on a file of its own
// in /dev/shm for as long as its communicator lives; the kernel drops the
// lock when the process exits, however it exits, and a child it forks does
// not inherit it. A peer that tests the lock (F_GETLK) and finds it free knows
// the rank's process or communicator is gone. The files are unlinked once
// every rank that watches them has opened them: only a crash during the
// init can leave one behind.
#pragma once

#include "nccl.h"

struct ncclComm;

namespace accl {

// At init, after the peer exchange; collective (a bootstrap allgather and a
// barrier), and only where some two ranks of one host are in different PID
// namespaces.
ncclResult_t peerLifeSetup(ncclComm* comm);
// At free: the peers watching this rank see it gone from here on.
void peerLifeRelease(ncclComm* comm);
// Only the lock, for a communicator left allocated (commFree's leak paths):
// its watchers see it gone, while waits still running keep the peers' files.
void peerLifeLeave(ncclComm* comm);
// Why rank k is gone (its process died, by pid; or, in another PID namespace,
// its process exited or its communicator went), or nullptr while it is there
// or where nothing can tell (another host: its sockets say so).
const char* peerGone(const ncclComm* comm, int k);

}  // namespace accl
