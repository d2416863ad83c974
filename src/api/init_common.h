// Shared by the entry points that create communicators (init_api.cc, comm_api.cc).
#pragma once

#include <functional>

#include "core/comm.h"

// Hands `comm` out through *out and runs `job` (the init) the way the context asks:
// queued inside a group, on a thread for a non-blocking config (ncclInProgress),
// or now (a failed blocking init frees the comm and sets *out = NULL).
ncclResult_t acclStartInit(ncclComm* comm, std::function<ncclResult_t()> job, ncclComm_t* out,
                           ncclComm* parent = nullptr);
// ncclCommInitRankConfig's work (`fn` names the caller in WARNs); `device` >= 0
// is ncclCommInitAll's devlist entry, -1 the calling thread's device.
ncclResult_t acclInitRank(const char* fn, ncclComm_t* out, int nranks, const ncclUniqueId& commId, int rank,
                          ncclConfig_t* config, int device = -1);
// ncclInvalidArgument + WARN unless comm is a live communicator.
ncclResult_t acclCheckComm(const ncclComm* comm, const char* fn);
// acclCheckComm, and its init has finished (else ncclInvalidUsage + WARN).
ncclResult_t acclCheckInitDone(const ncclComm* comm, const char* fn);
// acclCheckComm, and the communicator can take new operations: initialised,
// not revoked, no earlier error (in device mode, a kernel's failure counts).
ncclResult_t acclCheckUsable(ncclComm* comm, const char* fn);
// ncclInvalidUsage + WARN for an ACCL_MODE this build cannot run.
ncclResult_t acclCheckMode(const char* fn);
// ncclInvalidArgument + WARN unless `size` bytes at `buff` are memory this
// process holds (a registration's buffer: host mappings, or the device
// allocation that holds it), where that can be told.
ncclResult_t acclCheckMemory(const ncclComm* comm, const void* buff, size_t size, const char* fn);
