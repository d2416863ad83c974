// Socket transport between hosts. Each side keeps a FIFO in its own memory; a
// proxy thread moves slots between that FIFO and the socket (send side: drain
// posted slots onto the wire; receive side: fill free slots from the wire), so
// the algorithms see the same FIFO as with shared memory.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "bootstrap/socket.h"
#include "core/check.h"
#include "core/comm.h"

namespace accl {
namespace {

class NetConnection : public Connection {
 public:
  NetConnection(ncclComm* comm, int fd, bool send, int peer) : comm_(comm), fd_(fd) {
    isSend = send;
    this->peer = peer;
    kind = "net";
    size_t slot = slotBytesParam();
    mem_ = aligned_alloc(4096, fifoBytes(slot));
    fifoInit(mem_, slot, &fifo);
  }
  ~NetConnection() override {
    stop_.store(true);
    shutdown(fd_, SHUT_RDWR);
    if (proxy_.joinable()) proxy_.join();
    close(fd_);
    free(mem_);
  }
  void start() { proxy_ = std::thread(isSend ? &NetConnection::sendLoop : &NetConnection::recvLoop, this); }
  void abort(int failedRank) override {
    fifo.ctrl->failedRank.store(failedRank);  // local only: the socket closing is what the peer sees
    fifo.ctrl->abort.store(1);
    shutdown(fd_, SHUT_RDWR);  // the peer's proxy sees the connection close
  }
  ncclResult_t drain() override {
    if (!isSend) return ncclSuccess;
    Deadline dl(&comm_->abortFlag);
    Backoff b;
    while (fifo.ctrl->head.load(std::memory_order_acquire) < fifo.ctrl->tail.load(std::memory_order_relaxed)) {
      if (fifo.ctrl->peerGone.load() || dl.aborted()) return ncclRemoteError;
      if (b.checkNow() && dl.expired()) return ncclTimeout;
      b.pause();
    }
    return ncclSuccess;
  }

 private:
  bool stopping() const { return stop_.load(std::memory_order_relaxed) || comm_->abortFlag.load() != 0; }

  void fail(const char* what) {
    fifo.ctrl->peerGone.store(1);
    if (stopping()) return;
    WARN("rank %d: %s rank %d (%s) failed: connection lost (peer process died or aborted)", comm_->rank, what,
         peer, comm_->peers[peer].hostname);
    commSetError(comm_, ncclRemoteError);
  }

  void sendLoop() {
    Deadline idle(&comm_->abortFlag, 0);  // an idle communicator is legitimate: no deadline here
    uint64_t sent = 0;
    Backoff b;
    while (!stopping()) {
      if (fifo.ctrl->tail.load(std::memory_order_acquire) == sent) {
        b.pause();
        continue;
      }
      b.reset();
      uint32_t bytes = fifo.ctrl->bytes[sent % kSlots];
      if (socketSend(fd_, &bytes, sizeof(bytes), idle) != ncclSuccess ||
          socketSend(fd_, fifo.slot(sent), bytes, idle) != ncclSuccess) {
        fail("sending to");
        return;
      }
      fifo.ctrl->head.store(++sent, std::memory_order_release);
    }
  }

  void recvLoop() {
    Deadline idle(&comm_->abortFlag, 0);
    uint64_t got = 0;
    Backoff b;
    while (!stopping()) {
      if (got - fifo.ctrl->head.load(std::memory_order_acquire) >= kSlots) {
        b.pause();
        continue;
      }
      b.reset();
      uint32_t bytes;
      ncclResult_t r = socketRecv(fd_, &bytes, sizeof(bytes), idle);
      if (r == ncclRemoteError) {  // closed between messages: an error only if someone waits for more
        fifo.ctrl->peerGone.store(1);
        return;
      }
      if (r != ncclSuccess || bytes > fifo.slotBytes ||
          socketRecv(fd_, fifo.slot(got), bytes, idle) != ncclSuccess) {
        fail("receiving from");
        return;
      }
      fifo.ctrl->bytes[got % kSlots] = bytes;
      fifo.ctrl->tail.store(++got, std::memory_order_release);
    }
  }

  ncclComm* comm_;
  int fd_;
  void* mem_ = nullptr;
  std::atomic<bool> stop_{false};
  std::thread proxy_;
};

}  // namespace

ncclResult_t netConnectSend(ncclComm* comm, int peer, int tag, ConnPtr* out) {
  int fd;
  NCCLCHECK(comm->bootstrap->connectPeer(peer, Purpose::Data, tag, &fd));
  auto c = std::make_unique<NetConnection>(comm, fd, true, peer);
  c->start();
  *out = std::move(c);
  return ncclSuccess;
}

ncclResult_t netAcceptRecv(ncclComm* comm, int peer, int tag, ConnPtr* out) {
  int fd;
  NCCLCHECK(comm->bootstrap->acceptPeer(peer, Purpose::Data, tag, &fd));
  auto c = std::make_unique<NetConnection>(comm, fd, false, peer);
  c->start();
  *out = std::move(c);
  return ncclSuccess;
}

}  // namespace accl
