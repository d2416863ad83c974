// What kernels see of a device connector, whichever transport made it: the
// per-channel table in GPU memory, and pinned host memory that kernels reach
// (a device connector over the network keeps its FIFO there, where the
// connection's proxy moves it). Without the CUDA executor each fails with a
// WARN.
#pragma once

#include <cstddef>
#include <vector>

#include "device/dev_types.h"
#include "nccl.h"

#ifdef ACCL_HAVE_DEVICE_PATH
#include <cuda_runtime.h>
#endif

struct ncclComm;

namespace accl {

// `bytes` of pinned host memory, zeroed: *host for this process's threads,
// *dev for kernels. `what` names its use in a WARN.
ncclResult_t devHostAlloc(ncclComm* comm, size_t bytes, const char* what, void** host, void** dev);
void devHostFree(void* host);

// The channels' table, copied into GPU memory on a stream of its own (a
// plain copy would wait for kernels of other ranks of this process that may
// be waiting for this one), after zeroing `zeroBytes` of GPU memory at
// `zero` (a receiver's counters) where given. `peer` names the connector's.
ncclResult_t devTableMake(ncclComm* comm, int peer, const std::vector<DevChan>& chans, void* zero, size_t zeroBytes,
                          DevChan** table);
void devTableFree(DevChan* table);

#ifdef ACCL_HAVE_DEVICE_PATH
// True where `e` is cudaSuccess; else a WARN naming the connector with
// `peer` (-1: none yet) and what failed, and false.
bool devCudaOk(cudaError_t e, const char* what, ncclComm* comm, int peer);
#endif

}  // namespace accl
