// Device memory of other processes on this host, through CUDA IPC. A process
// may map an allocation only once, so mappings are shared and counted here:
// windows of one allocation, several communicators, and the direct
// collectives' registered buffers (coll/dev_share.cc) all reuse one mapping.
// Only built with the CUDA executor (ACCL_HAVE_DEVICE_PATH).
#pragma once

#include <cstddef>

#include "nccl.h"

struct ncclComm;

namespace accl {

// Maps the allocation of `handle` (a cudaIpcMemHandle_t's 64 bytes, from rank
// `peer`) into this rank's device context, or counts one more user of its
// mapping. A WARN names `what` and the peer when it cannot.
ncclResult_t ipcOpen(ncclComm* comm, const char* handle, int peer, const char* what, void** out);
// One user fewer of the mapping at `base`; the last one unmaps it.
void ipcClose(void* base);
// The allocation that device address `p` lies in (cudaIpcGetMemHandle shares
// whole allocations): its base and size. false: not device memory CUDA knows.
bool allocationRange(const void* p, char** base, size_t* bytes);

}  // namespace accl
