#include "core/comm.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "accl.h"
#include "coll/coll.h"
#include "coll/host_direct.h"
#include "coll/p2p_reach.h"
#include "core/check.h"
#include "core/mode.h"
#include "core/peer_life.h"

namespace accl {
namespace {

uint64_t fnv1a(const void* data, size_t len, uint64_t h = 1469598103934665603ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < len; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

bool peerInfoValid(PeerInfo& p, int index, std::string* why) {
  p.hostname[sizeof(p.hostname) - 1] = '\0';  // printed in messages
  char buf[96];
  auto bad = [&](const char* field, long long v) {
    snprintf(buf, sizeof(buf), "%s = %lld", field, v);
    *why = buf;
    return false;
  };
  if (p.rank != index) return bad("rank", p.rank);
  if (p.deviceMode != 0 && p.deviceMode != 1) return bad("deviceMode", p.deviceMode);
  if (p.hostDirect != 0 && p.hostDirect != 1) return bad("hostDirect", p.hostDirect);
  if (p.pid <= 0) return bad("pid", p.pid);
  if (p.cudaDev < -1 || (p.deviceMode && p.cudaDev < 0)) return bad("cudaDev", p.cudaDev);
  // The FIFO slots: whole pages from 4 KiB to 1 GiB (slotBytesParam), which
  // every rank sizes its FIFOs by.
  if (p.slotBytes < 4096 || p.slotBytes > (1u << 30) || p.slotBytes % 4096 != 0) return bad("slotBytes", p.slotBytes);
  if (p.deviceMode && (p.smCount <= 0 || p.wantChannels < 0 || p.wantP2pChannels < 0))
    return bad(p.smCount <= 0 ? "smCount" : p.wantChannels < 0 ? "wantChannels" : "wantP2pChannels",
               p.smCount <= 0 ? p.smCount : std::min(p.wantChannels, p.wantP2pChannels));
  if (p.stageChunk < 0) return bad("stageChunk", p.stageChunk);
  return true;
}

uint64_t hostHash() {
  // NCCL's rule: NCCL_HOSTID replaces the host identity; otherwise hostname + boot id.
  const char* id = paramString(Param::HostId);
  std::string s;
  if (*id) {
    s = id;
  } else {
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    s = host;
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string b;
    if (boot >> b) s += b;
    struct stat shm;
    if (stat("/dev/shm", &shm) == 0)
      s += "/dev/shm:" + std::to_string(shm.st_dev) + ":" + std::to_string(shm.st_ino);
  }
  return fnv1a(s.data(), s.size());
}

uint64_t pidNamespace() {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

bool sameProcess(const ncclComm* comm, int k) {
  const PeerInfo &p = comm->peers[k], &me = comm->peers[comm->rank];
  return p.processKey == me.processKey && p.pid == me.pid;
}

pid_t localPid(const ncclComm* comm, int k) {
  const PeerInfo &p = comm->peers[k], &me = comm->peers[comm->rank];
  return p.hostHash == me.hostHash && p.pidNs == me.pidNs ? p.pid : 0;
}

bool processAlive(pid_t pid) {
  if (pid <= 0 || pid == getpid()) return true;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A killed child stays a zombie until reaped: it is dead for our purposes.
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  std::ifstream f(path);
  if (!f) return errno != ENOENT;
  std::string line;
  std::getline(f, line);
  size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

ncclResult_t commAbortedResult(ncclComm* comm, const char* op) {
  const int async = comm->asyncError.load();
  if (async != ncclSuccess && async != ncclInProgress) return static_cast<ncclResult_t>(async);
  WARN("%s (%s, rank %d): communicator was aborted", op, comm->name.c_str(), comm->rank);
  return ncclInvalidUsage;
}

void commSetError(ncclComm* comm, ncclResult_t err) {
  int expected = ncclSuccess;
  comm->asyncError.compare_exchange_strong(expected, err);
  if (expected == ncclInProgress) comm->asyncError.compare_exchange_strong(expected, err);
  // Wake our peers: they must not wait for data this rank will never send.
  int failed = comm->failedRank.load();
  forEachConnection(comm, [failed](Connection* c) { c->abort(failed); });
  devStopKernels(comm);
  hostDirectStop(comm);
}

ncclResult_t commDrain(ncclComm* comm) {
  ncclResult_t first = ncclSuccess;
  forEachConnection(comm, [&](Connection* c) {
    if (!c->isSend) return;
    ncclResult_t r = c->drain();
    if (r != ncclSuccess && first == ncclSuccess) {
      WARN("%s (rank %d): could not flush data to rank %d", comm->name.c_str(), comm->rank, c->peer);
      first = r;
    }
  });
  return first;
}

ncclResult_t getConnections(ncclComm* comm, const std::vector<int>& sendTo, const std::vector<int>& recvFrom,
                            int tag, std::vector<Connection*>* sends, std::vector<Connection*>* recvs) {
  std::vector<int> newSends, newRecvs;
  {
    std::lock_guard<std::recursive_mutex> lock(comm->connMu);
    for (int p : sendTo)
      if (!comm->sendConns.count({p, tag})) newSends.push_back(p);
    for (int p : recvFrom)
      if (!comm->recvConns.count({p, tag})) newRecvs.push_back(p);
  }
  std::vector<ConnPtr> s, r;
  // Not under connMu: this waits for the peers, and an abort must get through meanwhile.
  if (!newSends.empty() || !newRecvs.empty()) NCCLCHECK(connectPeers(comm, newSends, newRecvs, tag, &s, &r));
  std::lock_guard<std::recursive_mutex> lock(comm->connMu);
  for (auto& c : s) comm->sendConns[{c->peer, tag}] = std::move(c);
  for (auto& c : r) comm->recvConns[{c->peer, tag}] = std::move(c);
  if (sends) {
    sends->clear();
    for (int p : sendTo) sends->push_back(comm->sendConns[{p, tag}].get());
  }
  if (recvs) {
    recvs->clear();
    for (int p : recvFrom) recvs->push_back(comm->recvConns[{p, tag}].get());
  }
  return ncclSuccess;
}

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
                acclGetVersionString(), acclGetVersionString(), path, mode.reason.c_str());
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
    WARN("%s (valid algorithms: ring, tree; NCCL_ALGO/NCCL_PROTO take NCCL's syntax)", err.c_str());
    return ncclInvalidUsage;
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
  uint32_t algo = me.algoBits;
  comm->slotBytes = me.slotBytes;
  for (const PeerInfo& p : comm->peers) {
    algo &= p.algoBits;
    comm->slotBytes = std::min<size_t>(comm->slotBytes, p.slotBytes);
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
  if (comm->slotBytes != me.slotBytes)
    INFO(kInit, "rank %d: FIFO slots of %zu bytes, the smallest any rank asks for (NCCL_BUFFSIZE, ACCL_CHUNKSIZE; "
         "here %u)", rank, comm->slotBytes, me.slotBytes);

  std::set<uint64_t> hosts;
  for (const PeerInfo& p : comm->peers) hosts.insert(p.hostHash);
  comm->nhosts = static_cast<int>(hosts.size());

  NCCLCHECK(peerLifeSetup(comm));
  Ring& ring = comm->ring;
  ring.order.resize(nranks);
  for (int i = 0; i < nranks; ++i) ring.order[i] = i;
  ring.position = rank;
  ring.prev = ring.order[(rank + nranks - 1) % nranks];
  ring.next = ring.order[(rank + 1) % nranks];
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

bool commTakeConnections(ncclComm* comm, std::vector<ConnPtr>* taken) {
  std::vector<ConnPtr>& all = *taken;
  {
    std::lock_guard<std::recursive_mutex> lock(comm->connMu);
    all.push_back(std::move(comm->ring.send));
    all.push_back(std::move(comm->ring.recv));
    for (auto& kv : comm->sendConns) all.push_back(std::move(kv.second));
    for (auto& kv : comm->recvConns) all.push_back(std::move(kv.second));
    comm->sendConns.clear();
    comm->recvConns.clear();
  }
  // A walk's fn does not wait for anything commFree holds (aborts store and
  // wake; drains come only from calls, which have left by now). Bounded all
  // the same: better a leak than a destroy that never returns.
  const auto by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (comm->connWalkers.load() > 0 && std::chrono::steady_clock::now() < by) usleep(50);
  if (comm->connWalkers.load() > 0) {  // the walker goes on to use the communicator too: it must stay
    WARN("%s (rank %d): a walk over its connections is still under way 10 s after they were taken out: the "
         "communicator is left allocated rather than freed under it", comm->name.c_str(), comm->rank);
    for (ConnPtr& c : all) (void)c.release();
    all.clear();
    return false;
  }
  return true;
}

void commFree(ncclComm* comm) {
  unregisterComm(comm);
  if (comm->initThread.joinable()) comm->initThread.join();
  // Everything that could still wait on this comm checks abortFlag; give it time to leave.
  const auto leaveBy = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto inside = [comm] { return comm->inFlight.load() > 0 || commPinned(comm); };
  while (inside() && std::chrono::steady_clock::now() < leaveBy) usleep(100);
  if (inside()) {  // better a leak than freeing memory a call still uses
    devStopWatch(comm);
    peerLifeLeave(comm);
    WARN("%s (rank %d): calls are still inside the communicator 10 s after it was stopped: it is left "
         "allocated rather than freed under them", comm->name.c_str(), comm->rank);
    return;
  }
  devStop(comm);   // the proxy of staged device operations uses the connections
  rmaStop(comm);   // so does the receiver of one-sided operations
  {
    std::vector<ConnPtr> conns;
    if (!commTakeConnections(comm, &conns)) {
      peerLifeLeave(comm);
      return;
    }
  }  // destroyed here, outside connMu
  comm->dev.reset();  // after the device connectors, whose release waits for the kernels
  comm->hostDirect.reset();  // after the windows and the proxies, which may stop its slot (commSetError)
  for (Registration* r : comm->registrations) delete r;
  peerLifeRelease(comm);  // last: its watchers see it gone from here on
  comm->magic = kCommDeadMagic;
  delete comm;
}

}  // namespace accl
