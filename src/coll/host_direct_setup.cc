// Direct collectives in host mode: the communicator's setup at init, and
// the windows' mapping at registration (coll/host_direct.h).
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/fork_safe.h"
#include "base/param.h"
#include "base/wait.h"
#include "bootstrap/bootstrap.h"
#include "coll/cross_copy.h"
#include "coll/host_direct.h"
#include "coll/host_direct_state.h"
#include "coll/rma.h"
#include "coll/tuner.h"
#include "core/comm.h"
#include "transport/connection.h"

namespace accl {
namespace {

// Random, one per process, at a fixed address: ranks with the same key and
// pid share an address space (pids alone repeat across pid namespaces). A
// peer that reads the key at that address through cross memory attach has
// reached this very process. A child of fork() makes a key of its own.
std::mutex keyMu;
std::mutex& keyLock() { return keyMu; }
const HeldAcrossFork<keyLock> keyFreeAtFork;  // a child makes its key under it
uint64_t key = 0;
pid_t keyPid = 0;
uint64_t processKey() {
  std::lock_guard<std::mutex> lock(keyMu);
  if (keyPid != getpid()) {
    keyPid = getpid();
    uint64_t k = 0;
    if (getrandom(&k, sizeof(k), 0) != sizeof(k))
      k = (static_cast<uint64_t>(keyPid) << 32) ^ static_cast<uint64_t>(Deadline::Clock::now().time_since_epoch().count());
    key = k | 1;  // never 0, which a failed read leaves
  }
  return key;
}

// Every rank on one host: what all ranks know alike.
bool oneHost(const ncclComm* comm) {
  if (comm->nranks < 2) return false;
  for (const PeerInfo& p : comm->peers)
    if (p.hostHash != comm->peers[comm->rank].hostHash) return false;
  return true;
}

// This rank's inline bound (ACCL_DIRECT_INLINE_BYTES, at most kInlineBytes).
int64_t inlineBound() { return std::min<int64_t>(kInlineBytes, paramInt(Param::DirectInlineBytes)); }
// Rank 0's bound sizes the payloads (the agreed one is the smallest any rank sets).
size_t payloadBytesFor(int64_t bound) { return (static_cast<size_t>(std::max<int64_t>(bound, 0)) + 63) / 64 * 64; }
size_t segmentBytes(int n, size_t payloadBytes) {
  return static_cast<size_t>(n) * (sizeof(Slot) + kDescs * payloadBytes);
}
std::string segmentName(const ncclComm* comm) { return shmSegmentName(comm, 0, 0, kTagHostDirect); }

}  // namespace

void HostDirectDeleter::operator()(HostDirect* d) const { delete d; }

HostDirectExport hostDirectExport(const void* buff, size_t bytes) {
  HostDirectExport e{};
  e.share = hostShareFind(buff, bytes);
  e.addr = reinterpret_cast<uintptr_t>(buff);
  e.bytes = bytes;
  return e;
}

void hostDirectPrepare(ncclComm* comm, PeerInfo* me) {
  me->processKey = processKey();
  me->reachProbe = reinterpret_cast<uintptr_t>(&key);
  me->hostDirect = comm->nranks >= 2 && directAllowed() && paramInt(Param::ShmDisable) == 0;
}

ncclResult_t hostDirectInit(ncclComm* comm) {
  const int n = comm->nranks, me = comm->rank;
  int off = -1;
  for (int q = 0; q < n && off < 0; ++q)
    if (!comm->peers[q].hostDirect) off = q;
  const bool together = oneHost(comm);
  if (!together || off >= 0) {
    if (together && me == 0)
      INFO(kInit, "%s: no direct collectives: rank %d runs with ACCL_DIRECT=0, NCCL_SHM_DISABLE=1 or NCCL_ALGO",
           comm->name.c_str(), off);
    return ncclSuccess;
  }
  // Rank 0 makes the slots, with payloads its inline bound's size; the others
  // open them once an allgather says it did, and how large. Rank 0 unlinks the
  // name after the next allgather, when all have.
  std::vector<int64_t> made(n, -1);  // rank 0's payload size, or -1: no slots
  void* map = nullptr;
  if (me == 0) {
    const size_t payloadBytes = payloadBytesFor(inlineBound()), bytes = segmentBytes(n, payloadBytes);
    if (shmSegmentCreate(comm, "the direct collectives' slots", segmentName(comm), bytes, &map) == ncclSuccess) {  // else WARNed
      memset(map, 0, bytes);
      comm->hostDirect.reset(new HostDirect(comm, map, bytes, payloadBytes, segmentName(comm)));
      made[0] = static_cast<int64_t>(payloadBytes);
    }
  }
  NCCLCHECK(comm->bootstrap->allgather(made.data(), sizeof(int64_t)));
  const size_t payloadBytes = static_cast<size_t>(std::max<int64_t>(made[0], 0)), bytes = segmentBytes(n, payloadBytes);
  if (me != 0 && made[0] >= 0 &&
      shmSegmentOpen(comm, "the direct collectives' slots", segmentName(comm), bytes, &map) == ncclSuccess)
    comm->hostDirect.reset(new HostDirect(comm, map, bytes, payloadBytes));
  // Each rank tries to attach to every process of another rank.
  struct Report {
    int32_t slots;      // this rank mapped the slots
    int32_t unreached;  // a rank whose process this one cannot attach to (itself: ACCL_CMA=0), or -1
    int32_t err;        // errno of the attempt
    int32_t unused;     // sent too: no padding of uninitialised bytes
    int64_t inlineBytes, minBytes;  // this rank's ACCL_DIRECT_INLINE_BYTES and ACCL_DIRECT_MIN_BYTES
  };
  std::vector<Report> all(n);
  Report& mine = all[me];
  mine = {comm->hostDirect != nullptr, -1, 0, 0, inlineBound(), paramInt(Param::DirectMinBytes)};
  for (int q = 0; q < n && mine.unreached < 0; ++q) {
    if (q == me || sameProcess(comm, q)) continue;
    if (paramInt(Param::Cma) == 0) {
      mine.unreached = me;
    } else if (!crossReachable(localPid(comm, q), comm->peers[q].reachProbe, comm->peers[q].processKey)) {
      mine.unreached = q;
      mine.err = errno;
    }
  }
  NCCLCHECK(comm->bootstrap->allgather(all.data(), sizeof(Report)));
  if (comm->hostDirect) comm->hostDirect->unlink();  // rank 0: every rank opened it (or failed to) before the allgather
  for (int q = 0; q < n; ++q) {
    if (all[q].slots) continue;
    comm->hostDirect.reset();
    if (me == 0) INFO(kInit, "%s: no direct collectives: rank %d could not map their slots", comm->name.c_str(), q);
    return ncclSuccess;
  }
  int who = 0;
  while (who < n && all[who].unreached < 0) ++who;
  HostDirect& d = *comm->hostDirect;
  d.anyBuffer = who == n;
  // Which path a call takes depends on its size alone, so every rank must
  // use the same bounds: a rank inline and another not would each think the
  // other's part done. The smallest inline bound, the largest direct one.
  d.inlineBytes = all[0].inlineBytes;
  d.minBytes = all[0].minBytes;
  for (const Report& rep : all) {
    d.inlineBytes = std::min(d.inlineBytes, rep.inlineBytes);
    d.minBytes = std::max(d.minBytes, rep.minBytes);
  }
  if (me != 0) return ncclSuccess;
  if (d.anyBuffer) {
    INFO(kInit, "%s: direct collectives on any buffer (%d ranks on this host; those of other processes reached "
         "through cross memory attach)", comm->name.c_str(), n);
  } else if (all[who].unreached == who) {
    INFO(kInit, "%s: direct collectives only on symmetric windows: rank %d runs with ACCL_CMA=0",
         comm->name.c_str(), who);
  } else if (comm->peers[who].pidNs != comm->peers[all[who].unreached].pidNs) {
    INFO(kInit, "%s: direct collectives only on symmetric windows: rank %d is in another PID namespace than "
         "rank %d (a container of its own), whose memory cross memory attach cannot name",
         comm->name.c_str(), all[who].unreached, who);
  } else {
    INFO(kInit, "%s: direct collectives only on symmetric windows: rank %d cannot attach to rank %d's process "
         "(process_vm_readv: %s; see ptrace's access rules)", comm->name.c_str(), who, all[who].unreached,
         strerror(all[who].err));
  }
  return ncclSuccess;
}

ncclResult_t hostDirectAttach(ncclComm* comm, ncclWindow_vidmem* win, const std::vector<HostDirectExport>& all) {
  HostDirect* d = comm->hostDirect.get();
  if (!d) return ncclSuccess;  // init said why
  const int n = comm->nranks, me = comm->rank;
  int32_t unreached = -1;  // the rank whose part this rank cannot map
  std::vector<char*> bases(n, nullptr);
  for (int q = 0; q < n && unreached < 0; ++q) {
    const HostDirectExport& e = all[q];
    if (e.bytes == 0) continue;  // no window on rank q: its buffers are never shared
    if (q == me) {
      bases[q] = static_cast<char*>(win->base);
    } else if (sameProcess(comm, q)) {
      bases[q] = reinterpret_cast<char*>(e.addr);
    } else if (e.share.fd < 0 || localPid(comm, q) != e.share.pid) {
      unreached = q;  // not ncclMemAlloc's memory, or a process whose /proc/<pid> is not this one's to open
    } else {
      void* mapping = nullptr;
      size_t bytes = 0;
      if (hostShareMap(e.share, &bases[q], &mapping, &bytes) != ncclSuccess) unreached = q;
      else win->hostMaps.push_back({mapping, bytes});
    }
  }
  std::vector<int32_t> unreachedBy(n, -1);
  unreachedBy[me] = unreached;
  ncclResult_t r = comm->bootstrap->allgather(unreachedBy.data(), sizeof(int32_t));
  int who = 0;
  while (who < n && unreachedBy[who] < 0) ++who;
  if (r != ncclSuccess || who < n) {
    hostDirectDetach(win);
    if (r == ncclSuccess)
      INFO(kInit, "%s rank %d: window #%d: rank %d cannot map rank %d's part (windows of other processes must be "
           "ncclMemAlloc memory): collectives on it %s", comm->name.c_str(), me, win->index, who, unreachedBy[who],
           d->anyBuffer ? "reach its buffers as they do any others" : "take the ring");
    return r;
  }
  win->hostPeerBase = std::move(bases);
  win->hostDirect = true;
  INFO(kInit, "%s rank %d: window #%d: direct collectives (%d ranks on this host)", comm->name.c_str(), me,
       win->index, n);
  return ncclSuccess;
}

bool hostDirectAnyBuffer(const ncclComm* comm) { return comm->hostDirect && comm->hostDirect->anyBuffer; }

void hostDirectStop(ncclComm* comm) {
  if (std::atomic<int32_t>* word = comm->directStopWord.load()) word->store(1);
}

void hostDirectDetach(ncclWindow_vidmem* win) {
  for (const auto& m : win->hostMaps) hostShareUnmap(m.first, m.second);
  win->hostMaps.clear();
  win->hostPeerBase.clear();
  win->hostDirect = false;
}

}  // namespace accl
