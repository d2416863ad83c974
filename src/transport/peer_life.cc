#include "transport/peer_life.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "base/check.h"
#include "bootstrap/bootstrap.h"
#include "core/comm.h"

namespace accl {
namespace {

// Rank k of this host lives in another PID namespace than this rank.
bool watched(const ncclComm* comm, int k) {
  const PeerInfo &p = comm->peers[k], &me = comm->peers[comm->rank];
  return k != comm->rank && p.hostHash == me.hostHash && p.pidNs != me.pidNs;
}

std::string lifeName(const ncclComm* comm, int rank) {
  char name[96];
  snprintf(name, sizeof(name), "/accl-%016llx-life-%d", static_cast<unsigned long long>(comm->commHash), rank);
  return name;
}

flock wholeFirstByte(short type) {
  flock l{};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = 0;
  l.l_len = 1;
  return l;
}

}  // namespace

ncclResult_t peerLifeSetup(ncclComm* comm) {
  // Every rank decides alike whether the allgather and barrier run: some host holds two PID namespaces.
  std::map<uint64_t, uint64_t> nsOfHost;
  bool any = false;
  for (const PeerInfo& p : comm->peers) {
    auto [it, added] = nsOfHost.emplace(p.hostHash, p.pidNs);
    any = any || (!added && it->second != p.pidNs);
  }
  if (!any) return ncclSuccess;
  bool watchedByAny = false;
  for (int k = 0; k < comm->nranks; ++k) watchedByAny = watchedByAny || watched(comm, k);
  // Nothing here fails the init: a rank without its lock (or a watcher
  // without the file) is found gone only at ACCL_TIMEOUT, as before the locks.
  // Readable by all (it holds nothing; testing a lock needs no write access),
  // for containers whose ranks run as other users.
  const std::string own = lifeName(comm, comm->rank);
  bool made = false;
  if (watchedByAny) {  // the watching is mutual: whom this rank watches watch it
    const int fd = shm_open(own.c_str(), O_CREAT | O_EXCL | O_RDWR, 0644);
    made = fd >= 0;
    if (made) fchmod(fd, 0644);  // past the umask
    flock l = wholeFirstByte(F_WRLCK);
    if (made && fcntl(fd, F_SETLK, &l) == 0) {
      comm->lifeOwnFd = fd;
    } else {
      WARN("rank %d: cannot make its liveness lock %s: %s; ranks of this host in other PID namespaces will find its "
           "death only at ACCL_TIMEOUT", comm->rank, own.c_str(), strerror(errno));
      if (made) {  // an unlocked file would read as a dead rank
        close(fd);
        shm_unlink(own.c_str());
        made = false;
      }
    }
  }
  // Every lock is taken, and each rank says whether it holds one: a file of
  // the same name left by someone else must not read as a dead rank.
  std::vector<char> locked(comm->nranks, 0);
  locked[comm->rank] = comm->lifeOwnFd >= 0;
  ncclResult_t r = comm->bootstrap->allgather(locked.data(), 1);
  comm->lifeFds.assign(comm->nranks, -1);
  for (int k = 0; k < comm->nranks && r == ncclSuccess; ++k) {
    if (!watched(comm, k) || !locked[k]) continue;  // not locked: found gone only at ACCL_TIMEOUT
    const std::string name = lifeName(comm, k);
    comm->lifeFds[k] = shm_open(name.c_str(), O_RDONLY, 0);
    if (comm->lifeFds[k] < 0)
      WARN("rank %d: cannot open rank %d's liveness lock %s (rank %d is in another PID namespace of this host): %s; "
           "its death will be found only at ACCL_TIMEOUT", comm->rank, k, name.c_str(), k, strerror(errno));
  }
  if (r == ncclSuccess) r = comm->bootstrap->barrier();  // every watcher has the files open
  if (made) shm_unlink(own.c_str());
  NCCLCHECK(r);
  INFO(kInit, "%s rank %d: ranks of this host in other PID namespaces are watched through record locks",
       comm->name.c_str(), comm->rank);
  return ncclSuccess;
}

void peerLifeLeave(ncclComm* comm) {
  if (comm->lifeOwnFd >= 0) close(comm->lifeOwnFd);  // drops the lock
  comm->lifeOwnFd = -1;
}

void peerLifeRelease(ncclComm* comm) {
  for (int& fd : comm->lifeFds)
    if (fd >= 0) close(fd);
  comm->lifeFds.clear();
  peerLifeLeave(comm);
}

const char* peerGone(const ncclComm* comm, int k) {
  const pid_t pid = localPid(comm, k);
  if (pid > 0) return processAlive(pid) ? nullptr : "the peer process has died";
  if (static_cast<size_t>(k) >= comm->lifeFds.size() || comm->lifeFds[k] < 0) return nullptr;
  // Alive while its write lock holds. Another lock (a read lock, which any
  // process that can open the file may take once the peer's is gone) says
  // nothing about the peer.
  flock l = wholeFirstByte(F_WRLCK);
  if (fcntl(comm->lifeFds[k], F_GETLK, &l) != 0 || l.l_type == F_WRLCK) return nullptr;
  return "the peer (in another PID namespace) is gone: its process exited or its communicator was destroyed";
}

}  // namespace accl
