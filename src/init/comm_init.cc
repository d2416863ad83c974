// commInit: a rank joins its communicator (the bootstrap, the peers'
// exchange, the ring's connections and every layer's state).
#include "init/lifecycle.h"

#include <dlfcn.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "base/check.h"
#include "base/fnv1a.h"
#include "base/param.h"
#include "base/version.h"
#include "bootstrap/bootstrap.h"
#include "coll/dev_comm.h"
#include "coll/host_direct.h"
#include "coll/p2p_reach.h"
#include "coll/tuner.h"
#include "core/mode.h"
#include "net/net.h"
#include "topo/topo.h"
#include "topo/topo_setup.h"
#include "transport/connection.h"
#include "transport/peer_life.h"

namespace accl {
namespace {

// As NCCL's "NCCL version ..." line, once per process at the first init, so a
// log shows which libnccl.so.2 answered (ACCL's, not NVIDIA's) and where it is.
void logVersionOnce(const ModeInfo& mode) {
  static std::once_flag once;
  std::call_once(once, [&] {
    Dl_info info{};
    const char* path = dladdr(reinterpret_cast<void*>(&logVersionOnce), &info) && info.dli_fname ? info.dli_fname
                                                                                                  : "?";
    VERSION_LOG("NCCL version %d.%d.%d+accl%s: ACCL %s (%s); %s", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
                versionString(), versionString(), path, mode.reason.c_str());
    // Read before logging could say so: a value that gave way to the default.
    const std::string problems = paramProblems();
    for (size_t at = 0, end; (end = problems.find('\n', at)) != std::string::npos; at = end + 1)
      WARN("%s", problems.substr(at, end - at).c_str());
  });
}

// The CPUs this host's processes may share: the online ones, fewer where
// this cgroup (v2, as a container sees it) has a CPU quota or a cpuset. Not
// this process's affinity, which a rank bound to a core narrows to one.
long hostCpus() {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  char buf[4096] = {};
  if (FILE* f = fopen("/sys/fs/cgroup/cpu.max", "r")) {  // "max 100000" or "200000 100000"
    long quota = 0, period = 0;
    if (fscanf(f, "%ld %ld", &quota, &period) == 2 && quota > 0 && period > 0)
      cpus = std::min(cpus, std::max(1L, (quota + period - 1) / period));
    fclose(f);
  }
  if (FILE* f = fopen("/sys/fs/cgroup/cpuset.cpus.effective", "r")) {  // "0-3,6,8-9"
    long n = 0;
    if (fgets(buf, sizeof(buf), f)) {
      for (char* p = buf; *p && *p != '\n';) {
        char* end = nullptr;
        const long lo = strtol(p, &end, 10);
        long hi = lo;
        if (end == p) break;
        if (*end == '-') hi = strtol(end + 1, &end, 10);
        n += hi >= lo ? hi - lo + 1 : 0;
        p = *end == ',' ? end + 1 : end;
      }
    }
    if (n > 0) cpus = std::min(cpus, n);
    fclose(f);
  }
  return std::max(1L, cpus);
}

// ncclComm::p2pPullMinBytes: ACCL_P2P_DIRECT and ACCL_P2P_DIRECT_MIN_BYTES.
int64_t p2pPullMinBytes(const ncclComm* comm) {
  if (!paramInt(Param::P2pDirect)) return -1;
  if (int64_t set = paramInt(Param::P2pDirectMinBytes); set > 0) return set;
  int here = 0;
  for (const PeerInfo& p : comm->peers) here += p.hostHash == comm->peers[comm->rank].hostHash;
  return here > hostCpus() ? int64_t{4} << 20 : int64_t{64} << 10;
}

}  // namespace

ncclResult_t commInit(ncclComm* comm, const UniqueIdLayout& id, int nranks, int rank) {
  comm->rank = rank;
  comm->nranks = nranks;
  comm->p2pSendTo.reset(new std::atomic<Connection*>[nranks]());
  comm->p2pRecvFrom.reset(new std::atomic<Connection*>[nranks]());
  const ModeInfo& mode = queryMode();
  logVersionOnce(mode);
  comm->deviceMode = mode.device && comm->cudaDev >= 0;  // cudaDev: chosen by the API call (devChoose)
  if (!comm->deviceMode) comm->cudaDev = -1;
  comm->name = comm->config.commName.empty() ? "comm (initialising)" : comm->config.commName;

  std::string err;
  if (!parseAlgoSpec(paramString(Param::Algo), &comm->algoMask, &err) ||
      !parseProtoSpec(paramString(Param::Proto), &err)) {
    WARN("%s (valid algorithms: ring, tree, hier; NCCL_ALGO/NCCL_PROTO take NCCL's syntax)", err.c_str());
    return ncclInvalidUsage;
  }
  if (!comm->config.netName.empty() && *paramString(Param::Net)) {  // as NCCL: the environment wins
    INFO(kInit | kEnv, "%s: ncclConfig_t.netName \"%s\" gives way to NCCL_NET=%s", comm->name.c_str(),
         comm->config.netName.c_str(), paramString(Param::Net));
  } else if (!comm->config.netName.empty()) {  // as NCCL: the network this communicator's connections take
    std::string there;
    comm->net = netBackendNamed(comm->config.netName.c_str(), &there);
    if (!comm->net) {
      WARN("ncclConfig_t.netName = \"%s\" names no network here (there are: %s)", comm->config.netName.c_str(),
           there.c_str());
      return ncclInvalidArgument;
    }
  }
  NCCLCHECK(comm->bootstrap->init(id, rank, nranks, &comm->abortFlag));

  PeerInfo me = {};
  me.rank = rank;
  me.pid = getpid();
  me.pidNs = pidNamespace();
  me.hostHash = hostHash();
  if (getrandom(&me.nonce, sizeof(me.nonce), 0) != sizeof(me.nonce)) me.nonce = static_cast<uint64_t>(getpid());
  me.cudaDev = comm->cudaDev;
  me.deviceMode = comm->deviceMode;
  if (comm->deviceMode) NCCLCHECK(devProbe(comm, &me));
  gethostname(me.hostname, sizeof(me.hostname) - 1);
  me.algoBits = comm->algoMask.bits();
  me.slotBytes = static_cast<uint32_t>(slotBytesParam());
  me.slotBytesAcross = static_cast<uint32_t>(slotBytesParam(!comm->deviceMode));
  hostDirectPrepare(comm, &me);
  comm->peers.assign(nranks, PeerInfo());
  comm->peers[rank] = me;
  NCCLCHECK(comm->bootstrap->allgather(comm->peers.data(), sizeof(PeerInfo)));
  // Unique per communicator (names its shm segments), agreed by all ranks.
  comm->commHash = fnv1a(&comm->peers[0].nonce, sizeof(uint64_t), fnv1a(&id, sizeof(id)));
  if (comm->config.commName.empty()) {
    char name[64];
    snprintf(name, sizeof(name), "comm %016llx", static_cast<unsigned long long>(comm->commHash));
    comm->name = name;
  }
  for (int q = 0; q < nranks; ++q) {
    std::string why;
    if (!peerInfoValid(comm->peers[q], q, &why)) {
      WARN("rank %d: rank %d described itself with %s at init (a different ACCL build, or not ACCL)", rank, q,
           why.c_str());
      return ncclInvalidUsage;
    }
  }
  for (const PeerInfo& p : comm->peers) {
    if (p.deviceMode != me.deviceMode) {
      WARN("rank %d runs in %s mode but rank %d in %s mode: all ranks of a communicator must agree (ACCL_MODE)",
           rank, me.deviceMode ? "device" : "host", p.rank, p.deviceMode ? "device" : "host");
      return ncclInvalidUsage;
    }
  }

  // The ranks must run the same algorithms (a ring rank against an exchange
  // rank would reduce the wrong blocks), and both ends of a FIFO must agree
  // on its slots: every rank takes what all allow and the smallest slot.
  std::set<uint64_t> hosts;
  for (const PeerInfo& p : comm->peers) hosts.insert(p.hostHash);
  comm->nhosts = static_cast<int>(hosts.size());
  uint32_t algo = me.algoBits;
  const auto slotOf = [&](const PeerInfo& p) { return comm->nhosts > 1 ? p.slotBytesAcross : p.slotBytes; };
  comm->slotBytes = slotOf(me);
  for (const PeerInfo& p : comm->peers) {
    algo &= p.algoBits;
    comm->slotBytes = std::min<size_t>(comm->slotBytes, slotOf(p));
  }
  if (algo != me.algoBits) {
    comm->algoMask.setBits(algo);
    std::string none;  // collectives left with no algorithm: their calls fail
    for (CollKind k : {CollKind::AllReduce, CollKind::Broadcast, CollKind::Reduce, CollKind::AllGather,
                       CollKind::ReduceScatter})
      if (!comm->algoMask.allowsAny(k)) none += std::string(none.empty() ? "" : ", ") + collName(k);
    WARN("rank %d: NCCL_ALGO differs between the ranks; every rank runs only the algorithms all of them allow%s%s%s",
         rank, none.empty() ? "" : " (none left for ", none.c_str(), none.empty() ? "" : ")");
  }
  if (comm->slotBytes != slotOf(me))
    INFO(kInit, "rank %d: FIFO slots of %zu bytes, the smallest any rank asks for (NCCL_BUFFSIZE, ACCL_CHUNKSIZE; "
         "here %u)", rank, comm->slotBytes, slotOf(me));
  else if (rank == 0)
    INFO(kInit, "FIFO slots of %zu bytes (NCCL_BUFFSIZE / 8, or ACCL_CHUNKSIZE; host mode across hosts, unless "
         "set, %lld / 8)", comm->slotBytes, static_cast<long long>(kBuffBytesAcrossHosts));

  NCCLCHECK(peerLifeSetup(comm));
  // On several hosts, the ring goes host by host (each host's ranks in
  // rank order), so that it crosses between hosts once per host.
  if (comm->nhosts > 1) NCCLCHECK(topoSetup(comm));
  Ring& ring = comm->ring;
  ring.order.resize(nranks);
  for (int i = 0; i < nranks; ++i) ring.order[i] = comm->topo ? comm->topo->ring[i] : i;
  ring.position = static_cast<int>(std::find(ring.order.begin(), ring.order.end(), rank) - ring.order.begin());
  ring.prev = ring.order[(ring.position + nranks - 1) % nranks];
  ring.next = ring.order[(ring.position + 1) % nranks];
  if (nranks > 1) {
    std::vector<ConnPtr> sends, recvs;
    NCCLCHECK(connectPeers(comm, {ring.next}, {ring.prev}, kTagRing, &sends, &recvs));
    ring.send = std::move(sends[0]);
    ring.recv = std::move(recvs[0]);
  }
  NCCLCHECK(hostDirectInit(comm));
  NCCLCHECK(p2pReachInit(comm));
  comm->p2pPullMinBytes = p2pPullMinBytes(comm);
  if (comm->deviceMode) NCCLCHECK(devSetup(comm));
  INFO(kInit, "%s rank %d/%d ready (%s; ring %d -> %d -> %d, %s/%s)", comm->name.c_str(), rank, nranks,
       mode.reason.c_str(), ring.prev, rank, ring.next, ring.recv ? ring.recv->kind : "-",
       ring.send ? ring.send->kind : "-");
  return ncclSuccess;
}

}  // namespace accl
