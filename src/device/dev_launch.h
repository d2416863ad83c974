// Kernel launches of the CUDA executor (device/dev_launch.cu and the per-datatype
// device/dev_reducing.cu.in), for host code
// built with the CUDA runtime headers.
#pragma once

#include <cuda_runtime.h>

#include "device/dev_types.h"

namespace accl {

constexpr int kDevThreads = 512;  // threads per block (one block per channel)

// One collective: `blocks` blocks (w.nChannels for ring work; any number for DevColl::Local).
cudaError_t devLaunchColl(const DevCollWork& w, int blocks, cudaStream_t stream);
// Every rank's direct call as one: nranks x f.blocksPerRank blocks.
cudaError_t devLaunchFused(const DevFusedWork& f, cudaStream_t stream);
// A group's sends and receives that form a permutation of its ranks'
// buffers: as many blocks as the bytes give work to, at most maxBlocks.
cudaError_t devLaunchPermute(const DevPermWork& w, int maxBlocks, cudaStream_t stream);
// A group's point-to-point operations: w.nBlocks blocks.
cudaError_t devLaunchP2p(const DevP2pWork& w, cudaStream_t stream);
// A staged operation's wait (coll/dev_staged.cc): one thread writes `seq` to
// the host-mapped `go` word the proxy polls (when given: where the stream
// could not write it itself), then spins until the proxy raises the
// host-mapped `done` word to `seq`, or the deadline passes; with no `done`,
// it only writes `go`.
cudaError_t devLaunchStageHandover(uint64_t* go, uint64_t seq, const uint64_t* done, const DevCtx& ctx,
                                   cudaStream_t stream);
// Loads it now (CUDA loads kernels lazily, and loading waits for the kernels running).
cudaError_t devLoadStageKernel();
// One-sided operations on device windows (device/dev_rma.cu): raise one signal
// (an atomic add on a peer's counter, after the stream's earlier work), and
// ncclWaitSignal's wait.
cudaError_t devLaunchSignal(uint64_t* signal, cudaStream_t stream);
cudaError_t devLaunchWaitSignal(const DevRmaWait& w, cudaStream_t stream);
// Loads both now (not lazily at first launch: see dev_rma.cu).
cudaError_t devLoadRmaKernels();
size_t devTypeSize(int type);

}  // namespace accl
