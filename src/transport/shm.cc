// Shared-memory transport between processes (or ranks) on one host. The
// receiver creates a POSIX shm segment holding the FIFO; the sender maps it and
// writes (or reduces) straight into the receiver's slots: one copy per hop.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/check.h"
#include "base/param.h"
#include "bootstrap/socket.h"
#include "core/comm.h"
#include "transport/connection.h"
#include "transport/transport.h"

namespace accl {
namespace {

class ShmConnection : public Connection {
 public:
  ~ShmConnection() override {
    if (map_) munmap(map_, bytes_);
    if (!isSend && !name_.empty()) shm_unlink(name_.c_str());
  }
  void abort(int failedRank) override {
    if (!fifo.ctrl) return;
    fifoAbort(fifo.ctrl, failedRank);
  }
  void unlink() {
    if (!name_.empty()) shm_unlink(name_.c_str());
    name_.clear();
  }

  void* map_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;
};

}  // namespace

std::string shmSegmentName(const ncclComm* comm, int sender, int receiver, int tag) {
  char buf[96];
  snprintf(buf, sizeof(buf), "/accl-%016llx-%d-%d-%d", static_cast<unsigned long long>(comm->commHash), sender,
           receiver, tag);
  return buf;
}

namespace {

std::string shmSpace() {
  struct statvfs st;
  if (statvfs("/dev/shm", &st) != 0) return "unknown";
  return std::to_string(static_cast<unsigned long long>(st.f_bavail) * st.f_frsize) + " bytes";
}

}  // namespace

static bool shmUsable(const ncclComm* comm, int peer) {
  return !paramInt(Param::ShmDisable) && comm->peers[peer].hostHash == comm->peers[comm->rank].hostHash;
}

ncclResult_t shmSegmentCreate(ncclComm* comm, const std::string& what, const std::string& name, size_t bytes, void** map) {
  *map = nullptr;
  shm_unlink(name.c_str());  // a leftover from a crashed run with the same hash is stale
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    WARN("shm_open(%s) failed: %s", name.c_str(), strerror(errno));
    return ncclSystemError;
  }
  // posix_fallocate, not ftruncate: a sparse segment would die with SIGBUS on first
  // touch when /dev/shm is full; this fails now, with a message.
  int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    close(fd);
    shm_unlink(name.c_str());
    if (err == ENOSPC)
      WARN("/dev/shm is too small: rank %d needs %zu bytes for %s, %s available "
           "(enlarge /dev/shm, e.g. docker --shm-size, lower NCCL_BUFFSIZE, or set NCCL_SHM_DISABLE=1)",
           comm->rank, bytes, what.c_str(), shmSpace().c_str());
    else
      WARN("posix_fallocate(%s, %zu) failed: %s", name.c_str(), bytes, strerror(err));
    return ncclSystemError;
  }
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    shm_unlink(name.c_str());
    WARN("mmap of %s (%zu bytes) failed: %s", name.c_str(), bytes, strerror(errno));
    return ncclSystemError;
  }
  *map = m;
  return ncclSuccess;
}

ncclResult_t shmSegmentOpen(ncclComm* comm, const std::string& what, const std::string& name, size_t bytes, void** map) {
  *map = nullptr;
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    WARN("rank %d: shm_open(%s) for %s failed: %s", comm->rank, name.c_str(), what.c_str(), strerror(errno));
    return ncclSystemError;
  }
  // Smaller than this side expects (the two sides sized it differently): an
  // error now, not a SIGBUS at the first touch past its end.
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    WARN("rank %d: %s (%s) holds %lld bytes where %zu were expected", comm->rank, what.c_str(), name.c_str(),
         static_cast<long long>(st.st_size), bytes);
    close(fd);
    return ncclInternalError;
  }
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    WARN("mmap of %s failed: %s", name.c_str(), strerror(errno));
    return ncclSystemError;
  }
  *map = m;
  return ncclSuccess;
}

namespace {

ncclResult_t shmCreateRecv(ncclComm* comm, int peer, int tag, ConnPtr* out) {
  auto c = std::make_unique<ShmConnection>();
  c->isSend = false;
  c->peer = peer;
  c->kind = "shm";
  c->sharedCtrl = true;
  c->name_ = shmSegmentName(comm, peer, comm->rank, tag);
  size_t slot = comm->slotBytes;
  c->bytes_ = fifoBytes(slot);
  NCCLCHECK(shmSegmentCreate(comm, "its FIFO from rank " + std::to_string(peer), c->name_, c->bytes_, &c->map_));
  fifoInit(c->map_, slot, &c->fifo);
  c->fifo.ctrl->receiverPid = getpid();
  c->fifo.ctrl->senderPid = localPid(comm, peer);
  *out = std::move(c);
  return ncclSuccess;
}

ncclResult_t shmOpenSend(ncclComm* comm, int peer, int tag, ConnPtr* out) {
  auto c = std::make_unique<ShmConnection>();
  c->isSend = true;
  c->peer = peer;
  c->kind = "shm";
  c->sharedCtrl = true;
  std::string name = shmSegmentName(comm, comm->rank, peer, tag);
  size_t slot = comm->slotBytes;
  c->bytes_ = fifoBytes(slot);
  NCCLCHECK(shmSegmentOpen(comm, "the FIFO to rank " + std::to_string(peer), name, c->bytes_, &c->map_));
  c->fifo.ctrl = static_cast<FifoCtrl*>(c->map_);
  c->fifo.data = static_cast<char*>(c->map_) + 4096;
  c->fifo.slotBytes = slot;
  *out = std::move(c);  // the receiver owns (and unlinks) the name
  return ncclSuccess;
}

}  // namespace

namespace {

bool shmCanConnect(const ncclComm* comm, int peer, int tag) { return tag < kTagDevice && shmUsable(comm, peer); }

ncclResult_t shmRecvSide(ncclComm* comm, int peer, int tag, int* fd, const Deadline& dl, ConnPtr* out) {
  NCCLCHECK(shmCreateRecv(comm, peer, tag, out));
  return socketSend(*fd, &kShmTransport.code, 1, dl);  // the segment exists: the sender may map it
}

ncclResult_t shmSendSide(ncclComm* comm, int peer, int tag, int* fd, const Deadline& dl, ConnPtr* out) {
  NCCLCHECK(shmOpenSend(comm, peer, tag, out));
  return socketSend(*fd, &kShmTransport.code, 1, dl);  // mapped: the receiver may unlink the name
}

void shmUnlinkRecv(Connection* recv) {
  if (auto* s = dynamic_cast<ShmConnection*>(recv)) s->unlink();
}

}  // namespace

const Transport kShmTransport = {"shm", 'S', shmCanConnect, shmRecvSide, shmSendSide, shmUnlinkRecv};

}  // namespace accl
