#include "coll/primitives.h"

#include <chrono>
#include <cstring>

#include "core/check.h"
#include "core/comm.h"

namespace accl {
namespace {

uint64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Primitives::Primitives(ncclComm* comm, const char* opName, Connection* recv, Connection* send, ReduceFn reduce,
                       size_t elemSize)
    : comm_(comm), op_(opName), recv_(recv), send_(send), reduce_(reduce), elemSize_(elemSize) {}

size_t Primitives::maxChunkBytes() const {
  size_t m = static_cast<size_t>(-1);
  if (recv_) m = recv_->fifo.slotBytes;
  if (send_ && send_->fifo.slotBytes < m) m = send_->fifo.slotBytes;
  return m;
}

ncclResult_t Primitives::fail(Connection* c, ncclResult_t err, const char* why) {
  const PeerInfo& p = comm_->peers[c->peer];
  WARN("%s (%s, rank %d of %d, op #%llu): %s rank %d (pid %d on %s, via %s) %s", op_, comm_->name.c_str(),
       comm_->rank, comm_->nranks, static_cast<unsigned long long>(comm_->opCount),
       c->isSend ? "sending to" : "receiving from", c->peer, p.pid, p.hostname, c->kind, why);
  commSetError(comm_, err);
  return err;
}

// The slow-path checks of a wait: abort, peer failure, deadline, peer process alive.
ncclResult_t Primitives::checkWait(Connection* c, uint64_t* lastPeerCheck) {
  if (comm_->abortFlag.load(std::memory_order_relaxed)) {
    int async = comm_->asyncError.load();
    if (async != ncclSuccess && async != ncclInProgress) return static_cast<ncclResult_t>(async);
    WARN("%s (%s, rank %d): communicator was aborted", op_, comm_->name.c_str(), comm_->rank);
    return ncclInvalidUsage;
  }
  if (c->fifo.ctrl->abort.load(std::memory_order_relaxed)) {
    int root = c->fifo.ctrl->failedRank.load();
    char why[128];
    if (root >= 0 && root != c->peer)
      snprintf(why, sizeof(why), "failed: the peer stopped because rank %d failed", root);
    else if (root == c->peer)
      snprintf(why, sizeof(why), "failed: the peer aborted");
    else
      snprintf(why, sizeof(why), "failed: the peer reported an error");
    comm_->failedRank.store(root >= 0 ? root : c->peer);
    return fail(c, ncclRemoteError, why);
  }
  if (c->fifo.ctrl->peerGone.load(std::memory_order_relaxed)) {
    comm_->failedRank.store(c->peer);
    return fail(c, ncclRemoteError, "failed: connection closed (peer process died or destroyed its communicator)");
  }
  uint64_t now = nowMs();
  if (c->peerPid > 0 && now - *lastPeerCheck >= static_cast<uint64_t>(paramInt(Param::PeerCheckMs))) {
    *lastPeerCheck = now;
    if (!processAlive(c->peerPid)) {
      comm_->failedRank.store(c->peer);
      return fail(c, ncclRemoteError, "failed: the peer process has died");
    }
  }
  return ncclSuccess;
}

ncclResult_t Primitives::waitRecv(size_t bytes, const char** data) {
  FifoCtrl* ctrl = recv_->fifo.ctrl;
  Deadline dl(&comm_->abortFlag);
  Backoff b;
  uint64_t lastPeerCheck = nowMs();
  while (ctrl->tail.load(std::memory_order_acquire) <= recv_->step) {
    if (b.checkNow()) {
      NCCLCHECK(checkWait(recv_, &lastPeerCheck));
      if (dl.expired()) return fail(recv_, ncclTimeout, "timed out (ACCL_TIMEOUT)");
    }
    b.pause();
  }
  uint32_t got = ctrl->bytes[recv_->step % kSlots];
  if (got != bytes) {
    char why[128];
    snprintf(why, sizeof(why), "sent %u bytes where %zu were expected (ranks called different operations?)", got,
             bytes);
    return fail(recv_, ncclInvalidUsage, why);
  }
  *data = recv_->fifo.slot(recv_->step);
  return ncclSuccess;
}

ncclResult_t Primitives::waitSend(char** slot) {
  FifoCtrl* ctrl = send_->fifo.ctrl;
  Deadline dl(&comm_->abortFlag);
  Backoff b;
  uint64_t lastPeerCheck = nowMs();
  while (send_->step - ctrl->head.load(std::memory_order_acquire) >= kSlots) {
    if (b.checkNow()) {
      NCCLCHECK(checkWait(send_, &lastPeerCheck));
      if (dl.expired()) return fail(send_, ncclTimeout, "timed out (ACCL_TIMEOUT)");
    }
    b.pause();
  }
  *slot = send_->fifo.slot(send_->step);
  return ncclSuccess;
}

void Primitives::postSend(size_t bytes) {
  FifoCtrl* ctrl = send_->fifo.ctrl;
  ctrl->bytes[send_->step % kSlots] = static_cast<uint32_t>(bytes);
  ctrl->tail.store(++send_->step, std::memory_order_release);
}

void Primitives::releaseRecv() { recv_->fifo.ctrl->head.store(++recv_->step, std::memory_order_release); }

ncclResult_t Primitives::send(const void* src, size_t bytes) {
  char* slot;
  NCCLCHECK(waitSend(&slot));
  memcpy(slot, src, bytes);
  postSend(bytes);
  return ncclSuccess;
}

ncclResult_t Primitives::recv(void* dst, size_t bytes) {
  const char* data;
  NCCLCHECK(waitRecv(bytes, &data));
  memcpy(dst, data, bytes);
  releaseRecv();
  return ncclSuccess;
}

ncclResult_t Primitives::recvReduceSend(const void* local, size_t bytes) {
  const char* data;
  char* slot;
  NCCLCHECK(waitRecv(bytes, &data));
  NCCLCHECK(waitSend(&slot));
  reduce_(slot, data, local, bytes / elemSize_);
  postSend(bytes);
  releaseRecv();
  return ncclSuccess;
}

ncclResult_t Primitives::recvReduceCopySend(const void* local, void* out, size_t bytes) {
  const char* data;
  char* slot;
  NCCLCHECK(waitRecv(bytes, &data));
  NCCLCHECK(waitSend(&slot));
  reduce_(out, data, local, bytes / elemSize_);
  memcpy(slot, out, bytes);
  postSend(bytes);
  releaseRecv();
  return ncclSuccess;
}

ncclResult_t Primitives::recvCopySend(void* out, size_t bytes) {
  const char* data;
  char* slot;
  NCCLCHECK(waitRecv(bytes, &data));
  NCCLCHECK(waitSend(&slot));
  memcpy(out, data, bytes);
  memcpy(slot, data, bytes);
  postSend(bytes);
  releaseRecv();
  return ncclSuccess;
}

}  // namespace accl
