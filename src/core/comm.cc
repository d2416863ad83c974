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

#include "base/check.h"
#include "base/fnv1a.h"
#include "base/param.h"

namespace accl {

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
  const auto slotBad = [](uint32_t s) { return s < 4096 || s > (1u << 30) || s % 4096 != 0; };
  if (slotBad(p.slotBytes)) return bad("slotBytes", p.slotBytes);
  if (slotBad(p.slotBytesAcross)) return bad("slotBytesAcross", p.slotBytesAcross);
  if (p.deviceMode && (p.smCount <= 0 || p.wantChannels < 0 || p.wantP2pChannels < 0))
    return bad(p.smCount <= 0 ? "smCount" : p.wantChannels < 0 ? "wantChannels" : "wantP2pChannels",
               p.smCount <= 0 ? p.smCount : std::min(p.wantChannels, p.wantP2pChannels));
  if (p.stageChunk < 0) return bad("stageChunk", p.stageChunk);
  if (p.netKernels != 0 && p.netKernels != 1) return bad("netKernels", p.netKernels);
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
  // Wake our peers (they must not wait for data this rank will never send),
  // and this rank's own waiters, in every layer.
  if (comm->stopLayers) comm->stopLayers(comm);
}

}  // namespace accl
