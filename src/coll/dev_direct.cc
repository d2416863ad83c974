// Direct collectives (device/dev_direct.cuh) for communicators whose ranks all
// live in this process on one GPU: ncclCommInitAll with a repeated devlist,
// grouped inits, a thread per rank. Their kernels exchange buffer addresses at
// run time through a table in device memory that every rank of the
// communicator shares; this file makes that table (one per communicator, found
// by the communicator's hash, which all its ranks share) and frees it with the
// last rank. Ranks in other processes would need each buffer mapped through
// CUDA IPC on every call, so they keep the ring.
#ifdef ACCL_HAVE_DEVICE_PATH
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "coll/dev_state.h"

namespace accl {
namespace {

struct Table {
  DevDirectSlot* slots = nullptr;
  int users = 0;
};

std::mutex tablesMu;
std::map<uint64_t, Table>& tables() {
  static auto* t = new std::map<uint64_t, Table>();  // never destroyed: comms may outlive static destructors
  return *t;
}

bool allHereOnOneGpu(const ncclComm* comm) {
  const PeerInfo& me = comm->peers[comm->rank];
  for (const PeerInfo& p : comm->peers)
    if (p.pid != me.pid || p.hostHash != me.hostHash || p.devKey != me.devKey) return false;
  return true;
}

}  // namespace

ncclResult_t devDirectSetup(ncclComm* comm) {
  DevState& d = *comm->dev;
  const int n = comm->nranks;
  if (n < 2 || n > kDevMaxDirect || paramInt(Param::Direct) == 0 || !allHereOnOneGpu(comm)) return ncclSuccess;
  std::lock_guard<std::mutex> lock(tablesMu);
  Table& t = tables()[comm->commHash];
  if (!t.slots) {
    void* p = nullptr;
    CUDACHECK(cudaMalloc(&p, n * sizeof(DevDirectSlot)), "cudaMalloc (direct table)", comm);
    // Zeroed on a stream of its own and waited for: the first kernels may run
    // on non-blocking streams, which the legacy stream does not order.
    cudaStream_t zs = nullptr;
    cudaError_t e = cudaStreamCreateWithFlags(&zs, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaMemsetAsync(p, 0, n * sizeof(DevDirectSlot), zs);
    if (e == cudaSuccess) e = cudaStreamSynchronize(zs);
    if (zs) (void)cudaStreamDestroy(zs);
    if (e != cudaSuccess) {
      (void)cudaFree(p);
      tables().erase(comm->commHash);
      return cudaCheck(e, "cudaMemset (direct table)", comm);
    }
    t.slots = static_cast<DevDirectSlot*>(p);
  }
  ++t.users;
  d.direct = t.slots;
  comm->gpuBytes += sizeof(DevDirectSlot);  // this rank's share of the table
  // Every rank's blocks wait for the others', so all must be resident at once:
  // the multiprocessors are shared among the ranks (two 512-thread blocks fit one).
  d.directBlocks = std::max(1, d.smCount / n);
  INFO(kInit, "%s rank %d: direct collectives (%d ranks in this process on device %d), %d block(s) per rank",
       comm->name.c_str(), comm->rank, n, comm->cudaDev, d.directBlocks);
  return ncclSuccess;
}

void devDirectRelease(ncclComm* comm) {
  DevState* d = comm->dev.get();
  if (!d || !d->direct) return;
  std::lock_guard<std::mutex> lock(tablesMu);
  auto it = tables().find(comm->commHash);
  if (it != tables().end() && --it->second.users == 0) {
    (void)cudaFree(it->second.slots);
    (void)cudaGetLastError();
    tables().erase(it);
  }
  d->direct = nullptr;
}

}  // namespace accl
#endif
