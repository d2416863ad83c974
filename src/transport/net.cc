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
#include "transport/fifo_sleep.h"

namespace accl {
namespace {

// A frame header that is not a payload size: "I stopped because rank N failed",
// followed by N (int32). Sent by the send proxy between messages, so a rank
// downstream of a failure learns its cause.
constexpr uint32_t kAbortFrame = 0xffffffffu;
// A sleeping proxy looks at the abort flags this often (a stop wakes it at once).
constexpr int kIdleCheckMs = 20;

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
    // Aborting: the send proxy still tells the peer why (bounded by 1 s), then exits
    // by itself. Otherwise wake the proxy by closing the socket.
    bool aborting = fifo.ctrl->abort.load() != 0;
    stop_.store(1);
    wakeProxy();
    if (!aborting || !isSend) shutdown(fd_, SHUT_RDWR);
    if (proxy_.joinable()) proxy_.join();
    close(fd_);
    free(mem_);
  }
  void start() { proxy_ = std::thread(isSend ? &NetConnection::sendLoop : &NetConnection::recvLoop, this); }
  void abort(int failedRank) override {
    fifo.ctrl->failedRank.store(failedRank);
    fifo.ctrl->abort.store(1);
    wakeProxy();
    // A send proxy tells the peer why and closes; a receiver closes now, which the
    // peer's send proxy sees as a lost connection.
    if (!isSend) shutdown(fd_, SHUT_RDWR);
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
  void wakeProxy() { fifoWake(isSend ? &fifo.ctrl->tail : &fifo.ctrl->head); }

  bool stopping() const {
    return stop_.load(std::memory_order_relaxed) || comm_->abortFlag.load() != 0 || fifo.ctrl->abort.load() != 0;
  }

  void sendAbortFrame() {
    if (fifo.ctrl->abort.load() == 0 && comm_->abortFlag.load() == 0) return;  // a normal close
    uint32_t frame[2] = {kAbortFrame, static_cast<uint32_t>(fifo.ctrl->failedRank.load())};
    Deadline dl(nullptr, 1);
    (void)socketSend(fd_, frame, sizeof(frame), dl);
    shutdown(fd_, SHUT_RDWR);
  }

  void fail(const char* what) {
    fifo.ctrl->peerGone.store(1);
    if (stopping()) return;
    WARN("rank %d: %s rank %d (%s) failed: connection lost (peer process died or aborted)", comm_->rank, what,
         peer, comm_->peers[peer].hostname);
    // Named before the error spreads: the abort frames tell the other ranks
    // which rank failed (else they would name this one, which only noticed).
    int unknown = -1;
    comm_->failedRank.compare_exchange_strong(unknown, peer);
    commSetError(comm_, ncclRemoteError);
  }

  void sendLoop() {
    // An idle communicator is legitimate: no deadline. A message once started is
    // finished (so an abort frame can follow it) unless the connection is torn down.
    Deadline idle(&stop_, 0);
    uint64_t sent = 0;
    Backoff b;
    for (;;) {
      if (stopping()) {
        sendAbortFrame();
        return;
      }
      if (fifo.ctrl->tail.load(std::memory_order_acquire) == sent) {
        if (b.napping()) {  // idle: asleep until the sender posts (or stop wakes it)
          FifoSleepSet s;
          s.tail(fifo.ctrl, sent);
          s.sleep(kIdleCheckMs);
        } else {
          b.pause();
        }
        continue;
      }
      b.reset();
      uint32_t bytes = fifo.ctrl->bytes[sent % kSlots];
      if (socketSend(fd_, &bytes, sizeof(bytes), idle) != ncclSuccess ||
          socketSend(fd_, fifo.slot(sent), bytes, idle) != ncclSuccess) {
        fail("sending to");
        return;
      }
      fifoPostHead(fifo.ctrl, ++sent);
    }
  }

  void recvLoop() {
    Deadline idle(&fifo.ctrl->abort, 0);
    uint64_t got = 0;
    Backoff b;
    while (!stopping()) {
      const uint64_t head = fifo.ctrl->head.load(std::memory_order_acquire);
      if (got - head >= kSlots) {  // full: asleep until the receiver drains a slot (or stop wakes it)
        if (b.napping()) {
          FifoSleepSet s;
          s.head(fifo.ctrl, head);
          s.sleep(kIdleCheckMs);
        } else {
          b.pause();
        }
        continue;
      }
      b.reset();
      uint32_t bytes;
      ncclResult_t r = socketRecv(fd_, &bytes, sizeof(bytes), idle);
      if (r == ncclRemoteError) {  // closed between messages: an error only if someone waits for more
        fifo.ctrl->peerGone.store(1);
        return;
      }
      if (r == ncclSuccess && bytes == kAbortFrame) {
        int32_t cause = -1;
        Deadline dl(nullptr, 1);
        if (socketRecv(fd_, &cause, sizeof(cause), dl) != ncclSuccess) cause = -1;
        fifo.ctrl->failedRank.store(cause >= 0 ? cause : peer);
        fifo.ctrl->abort.store(1);
        return;
      }
      if (r != ncclSuccess || bytes > fifo.slotBytes ||
          socketRecv(fd_, fifo.slot(got), bytes, idle) != ncclSuccess) {
        fail("receiving from");
        return;
      }
      fifo.ctrl->bytes[got % kSlots] = bytes;
      fifoPostTail(fifo.ctrl, ++got);
    }
  }

  ncclComm* comm_;
  int fd_;
  void* mem_ = nullptr;
  std::atomic<uint32_t> stop_{0};
  std::thread proxy_;
};

}  // namespace

ncclResult_t netFromSocket(ncclComm* comm, int fd, bool isSend, int peer, ConnPtr* out) {
  auto c = std::make_unique<NetConnection>(comm, fd, isSend, peer);
  c->start();
  *out = std::move(c);
  return ncclSuccess;
}

}  // namespace accl
