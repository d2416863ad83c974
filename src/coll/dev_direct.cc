// Direct collectives (device/dev_direct.cuh) for communicators whose ranks all
// use one GPU. When they all live in this process (ncclCommInitAll with a
// repeated devlist, grouped inits, a thread per rank), their kernels exchange
// buffer addresses at run time through a table in device memory that every
// rank of the communicator shares; this file makes that table (one per
// communicator, found by the communicator's hash, which all its ranks share)
// and frees it with the last rank. Ranks in several processes reach each
// other's buffers only where they are mapped through CUDA IPC: in windows
// registered with NCCL_WIN_COLL_SYMMETRIC (coll/rma_dev.cc) or in allocations
// registered with ncclCommRegister (coll/dev_share.h); other calls take the ring.
#ifdef ACCL_HAVE_DEVICE_PATH
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "base/check.h"
#include "base/param.h"
#include "coll/dev_state.h"
#include "coll/host_direct.h"
#include "coll/tuner.h"

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

// One process: by pid and process key (sameProcess), since pids repeat
// across pid namespaces.
bool onOneGpu(const ncclComm* comm, bool oneProcess) {
  const PeerInfo& me = comm->peers[comm->rank];
  for (int k = 0; k < comm->nranks; ++k) {
    const PeerInfo& p = comm->peers[k];
    if ((oneProcess && !sameProcess(comm, k)) || p.hostHash != me.hostHash || p.devKey != me.devKey) return false;
  }
  return true;
}

}  // namespace

ncclResult_t devDirectSetup(ncclComm* comm) {
  DevState& d = *comm->dev;
  const int n = comm->nranks;
  if (n < 2 || n > kDevMaxDirect || !onOneGpu(comm, false)) return ncclSuccess;
  // Every rank's blocks wait for the others', so all must be resident at once:
  // the multiprocessors are shared among the ranks. ACCL_DIRECT_BLOCKS lowers
  // that for ranks of one process only: they read one environment, and every
  // rank's kernel must run as many blocks.
  const bool oneProcess = onOneGpu(comm, true);
  if (oneProcess && !directAllowed()) return ncclSuccess;  // one environment for every rank
  const int64_t want = oneProcess ? paramInt(Param::DirectBlocks) : 0;
  d.directBlocks = std::max(1, want > 0 ? static_cast<int>(std::min<int64_t>(want, d.smCount / n)) : d.smCount / n);
  if (!oneProcess) {
    NCCLCHECK(devShareSetup(comm, directAllowed(), &d.share));  // the ranks agree there
    if (!d.share) {
      d.directBlocks = 0;
      return ncclSuccess;
    }
    INFO(kInit, "%s rank %d: direct collectives on symmetric windows and registered buffers (%d ranks in several "
         "processes on device %d), %d block(s) per rank", comm->name.c_str(), comm->rank, n, comm->cudaDev,
         d.directBlocks);
    return ncclSuccess;
  }
  std::lock_guard<std::mutex> lock(tablesMu);
  Table& t = tables()[comm->commHash];
  if (!t.slots) {
    void* p = nullptr;
    CUDACHECK(cudaMalloc(&p, n * sizeof(DevDirectSlot)), "cudaMalloc (direct table)", comm);
    ncclResult_t r = devWriteSync(comm, p, nullptr, n * sizeof(DevDirectSlot), "cudaMemset (direct table)");
    if (r != ncclSuccess) {
      (void)cudaFree(p);
      tables().erase(comm->commHash);
      return r;
    }
    t.slots = static_cast<DevDirectSlot*>(p);
  }
  ++t.users;
  d.direct = t.slots;
  comm->gpuBytes += sizeof(DevDirectSlot);  // this rank's share of the table
  INFO(kInit, "%s rank %d: direct collectives (%d ranks in this process on device %d), %d block(s) per rank",
       comm->name.c_str(), comm->rank, n, comm->cudaDev, d.directBlocks);
  return ncclSuccess;
}

void devDirectRelease(ncclComm* comm) {
  DevState* d = comm->dev.get();
  if (d && d->share) devShareReport(comm, d->share.get());  // the share goes with the state, after the kernels
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
