// Socket transport between hosts. Each side keeps a FIFO in its own memory,
// and slots move between that FIFO and the socket (send side: posted slots
// onto the wire; receive side: free slots filled from the wire), so the
// algorithms see the same FIFO as with shared memory. The moving is
// non-blocking and done by whoever gets there first: the rank thread that
// posts or waits (Connection::progress), or the connection's proxy thread,
// which keeps it going while the rank computes and sleeps when idle. A small
// message thus crosses with no hand-over between threads.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/check.h"
#include "base/threads.h"
#include "base/wait.h"
#include "bootstrap/socket.h"
#include "core/comm.h"
#include "transport/connection.h"
#include "transport/fifo_sleep.h"
#include "transport/transport.h"

namespace accl {
namespace {

// A frame header that is not a payload size: "I stopped because rank N failed",
// followed by N (int32). Sent by the send proxy between messages, so a rank
// downstream of a failure learns its cause.
constexpr uint32_t kAbortFrame = 0xffffffffu;
// A sleeping proxy looks at the abort flags this often (a stop wakes it at once).
constexpr int kIdleCheckMs = 20;
// A proxy that left the socket to a rank thread looks again this often
// (hand-overs, failures, aborts and stops wake it at once).
constexpr int kDrivenNapMs = 1;

class NetConnection : public Connection {
 public:
  NetConnection(ncclComm* comm, int fd, bool send, int peer) : comm_(comm), fd_(fd) {
    isSend = send;
    this->peer = peer;
    kind = "net";
    size_t slot = comm->slotBytes;
    mem_ = aligned_alloc(4096, fifoBytes(slot));
    if (mem_) fifoInit(mem_, slot, &fifo);
  }
  ~NetConnection() override {
    if (!mem_) {  // start() refused it: no proxy, no FIFO
      close(fd_);
      return;
    }
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
  // The FIFO and its proxy thread; an error (not an exception) where memory
  // or threads (ulimit -u, pids.max: two per remote peer) ran out.
  ncclResult_t start() {
    if (!mem_) {
      WARN("rank %d: no memory for the FIFO of a socket connection %s rank %d (%zu bytes)", comm_->rank,
           isSend ? "to" : "from", peer, fifoBytes(comm_->slotBytes));
      return ncclSystemError;
    }
    return startThread(&proxy_, [this] { isSend ? sendLoop() : recvLoop(); },
                       "rank %d's proxy thread of a socket connection %s rank %d (one per connection and direction)",
                       comm_->rank, isSend ? "to" : "from", peer);
  }
  void abort(int failedRank) override {
    fifoAbort(fifo.ctrl, failedRank);
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
      if (fifo.ctrl->peerGone.load() || fifo.ctrl->abort.load() || dl.aborted()) return ncclRemoteError;
      if (b.checkNow() && dl.expired()) return ncclTimeout;
      progress();
      b.pause();
    }
    return ncclSuccess;
  }
  // A rank thread waiting on this FIFO moves the frames itself when the
  // proxy is not at it: no hand-over between threads on the way.
  void progress() override {
    if (!mu_.try_lock()) return;
    const Moved m = isSend ? moveSend() : moveRecv();
    mu_.unlock();
    if (m < Moved::Nothing) {  // the proxy reports it, driven or not
      needProxy_.store(true, std::memory_order_seq_cst);
      wakeProxy();
    }
  }
  // While a rank thread drives (a wait on this FIFO, or for a rank bound to
  // one core its whole operation, coll/steps.h), the proxy leaves the socket
  // to it: it would only take the frames, or the core, from it. The rank
  // wakes it when it goes to sleep, or stops driving with frames still to
  // send; else the proxy looks again within kDrivenNapMs.
  void driving(bool on, bool handOver) override {
    if (on) {
      driven_.fetch_add(1, std::memory_order_seq_cst);
      return;
    }
    driven_.fetch_sub(1, std::memory_order_seq_cst);
    if (isSend && unsent()) wakeProxy();  // frames left: whether the driver sleeps or is done
    else if (handOver) fifoWakeSleepers(&driven_, &drivenSleepers_);
  }
  // The rank's own frames leave from its thread; what the socket would not
  // take waits for the driver's next wait or, with no driver, for the proxy.
  void posted(uint64_t tail) override {
    fifo.ctrl->tail.store(tail, std::memory_order_seq_cst);
    if (unsent() && driven_.load(std::memory_order_seq_cst) == 0) wakeProxy();
  }
  bool sendsFromMemory() const override { return isSend; }
  void abandonFrom() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t k = sent_; k < fifo.ctrl->tail.load(std::memory_order_relaxed); ++k)
      if (from[k % kSlots]) {
        broken_ = true;  // moveSend and sendAbortFrame read no payload any more
        torn_ = off_ > 0 && from[sent_ % kSlots];  // a slot's frame can still be finished
        return;
      }
  }

 private:
  // What one pass of moveSend/moveRecv did. Failures are left for the proxy,
  // which finds them again and reports them.
  enum class Moved { Closed = -3, AbortFrame = -2, Failed = -1, Nothing = 0, Some = 1 };

  // Wherever the proxy sleeps: on its FIFO's counter, or napping on a driver.
  void wakeProxy() {
    if (isSend) fifoWakeSleepers(&fifo.ctrl->tail, &fifo.ctrl->tailSleepers);
    else fifoWakeSleepers(&fifo.ctrl->head, &fifo.ctrl->headSleepers);
    fifoWakeSleepers(&driven_, &drivenSleepers_);
  }

  // Send side: moves what the socket takes now; whether posted frames are left
  // (or the proxy is at it, and will see them).
  bool unsent() {
    if (!mu_.try_lock()) return true;
    const bool left = moveSend() == Moved::Failed || fifo.ctrl->tail.load(std::memory_order_relaxed) > sent_;
    mu_.unlock();
    return left;
  }

  bool stopping() const {
    return stop_.load(std::memory_order_relaxed) || comm_->abortFlag.load() != 0 || fifo.ctrl->abort.load() != 0;
  }

  // What a non-blocking send or recv returned `r` means: Some (*n bytes),
  // Nothing (it would block), Closed (a recv saw the peer close; lengths are
  // never 0) or Failed. The kernel reports an error once: it stays in
  // broken_, for whichever thread moves next. Under mu_.
  Moved took(ssize_t r, size_t* n) {
    *n = r > 0 ? static_cast<size_t>(r) : 0;
    if (r > 0) return Moved::Some;
    if (r == 0) return Moved::Closed;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Moved::Nothing;
    broken_ = true;
    return Moved::Failed;
  }
  Moved io(bool send, char* p, size_t len, size_t* n) {
    return took(send ? ::send(fd_, p, len, MSG_NOSIGNAL | MSG_DONTWAIT) : ::recv(fd_, p, len, MSG_DONTWAIT), n);
  }

  // Where frame k's payload is: the sender's memory, or the slot.
  const char* payload(uint64_t k) const { return from[k % kSlots] ? from[k % kSlots] : fifo.slot(k); }

  // Frames go out as the size (uint32), then the payload; off_ counts the
  // bytes of frame sent_ already on the wire (a frame once started is
  // finished, so an abort frame can follow it). Under mu_.
  Moved moveSend() {
    if (broken_) return Moved::Failed;
    Moved m = Moved::Nothing;
    while (fifo.ctrl->tail.load(std::memory_order_acquire) > sent_) {
      const uint32_t bytes = fifo.ctrl->bytes[sent_ % kSlots];
      const size_t frame = sizeof(bytes) + bytes;
      size_t n = 0;
      if (off_ < sizeof(bytes)) {  // the size and the payload in one call, one segment when small
        iovec iov[2] = {{reinterpret_cast<char*>(const_cast<uint32_t*>(&bytes)) + off_, sizeof(bytes) - off_},
                        {const_cast<char*>(payload(sent_)), bytes}};
        msghdr h{};
        h.msg_iov = iov;
        h.msg_iovlen = 2;
        if (took(sendmsg(fd_, &h, MSG_NOSIGNAL | MSG_DONTWAIT), &n) < Moved::Nothing) return Moved::Failed;
      } else if (io(true, const_cast<char*>(payload(sent_)) + (off_ - sizeof(bytes)), frame - off_, &n) <
                 Moved::Nothing) {
        return Moved::Failed;
      }
      if (n == 0) return m;  // the socket is full
      m = Moved::Some;
      off_ += n;
      if (off_ < frame) continue;
      off_ = 0;
      fifoPostHead(fifo.ctrl, ++sent_);
    }
    return m;
  }

  // Frames come in as the size, then the payload, into the next free slot;
  // off_ counts the bytes of frame got_ read so far, size_ its size. Under mu_.
  Moved moveRecv() {
    if (broken_) return Moved::Failed;
    Moved m = Moved::Nothing;
    for (;;) {
      if (got_ - fifo.ctrl->head.load(std::memory_order_acquire) >= kSlots) return m;  // full
      size_t n = 0;
      if (off_ < sizeof(size_)) {
        const Moved r = io(false, reinterpret_cast<char*>(&size_) + off_, sizeof(size_) - off_, &n);
        if (r < Moved::Nothing) return r == Moved::Closed && off_ == 0 ? Moved::Closed : Moved::Failed;
        if (n == 0) return m;
        off_ += n;
        if (off_ < sizeof(size_)) continue;
        m = Moved::Some;
      }
      // Every pass, not only the one that read the size: the state stays as
      // it is for the proxy, which finds the same answer and acts on it.
      if (size_ == kAbortFrame) return Moved::AbortFrame;
      if (size_ > fifo.slotBytes) return Moved::Failed;
      const size_t done = off_ - sizeof(size_);
      if (done < size_) {
        if (io(false, fifo.slot(got_) + done, size_ - done, &n) < Moved::Nothing) return Moved::Failed;
        if (n == 0) return m;
        m = Moved::Some;
        off_ += n;
        if (off_ - sizeof(size_) < size_) continue;
      }
      off_ = 0;
      fifo.ctrl->bytes[got_ % kSlots] = size_;
      fifoPostTail(fifo.ctrl, ++got_);
    }
  }

  // Waits (unlocked) until the socket may move again, or a wake or stop;
  // while a rank thread drives, until it stops instead.
  void waitSocket(short events) {
    if (napWhileDriven()) return;
    pollfd p = {fd_, events, 0};
    (void)poll(&p, 1, kIdleCheckMs);
  }

  void sendAbortFrame() {
    if (fifo.ctrl->abort.load() == 0 && comm_->abortFlag.load() == 0) return;  // a normal close
    Deadline dl(nullptr, 1);
    std::lock_guard<std::mutex> lock(mu_);
    if (torn_) {  // a frame from memory given back was cut short: no frame can follow it
      shutdown(fd_, SHUT_RDWR);
      return;
    }
    // Whatever happens below, nothing more goes on this socket: a rank thread
    // that posts later must not resend part of a frame.
    broken_ = true;
    struct Close {
      int fd;
      ~Close() { shutdown(fd, SHUT_RDWR); }
    } close{fd_};
    if (off_ > 0) {  // finish the frame on the wire first, so the peer reads the abort frame as one
      const uint32_t bytes = fifo.ctrl->bytes[sent_ % kSlots];
      char head[sizeof(bytes)];
      memcpy(head, &bytes, sizeof(bytes));
      if (off_ < sizeof(bytes) && socketSend(fd_, head + off_, sizeof(bytes) - off_, dl) != ncclSuccess) return;
      const size_t done = off_ < sizeof(bytes) ? 0 : off_ - sizeof(bytes);
      if (socketSend(fd_, payload(sent_) + done, bytes - done, dl) != ncclSuccess) return;
    }
    uint32_t frame[2] = {kAbortFrame, static_cast<uint32_t>(fifo.ctrl->failedRank.load())};
    (void)socketSend(fd_, frame, sizeof(frame), dl);
  }

  void fail(const char* what) {
    fifo.ctrl->peerGone.store(1);
    if (stopping()) return;
    WARN("rank %d: %s rank %d (%s) failed: connection lost (peer process died or aborted)", comm_->rank, what,
         peer, comm_->peers[peer].hostname);
    // Named before the error spreads: the abort frames tell the other ranks
    // which rank failed (else they would name this one, which only noticed).
    commNoteFailedRank(comm_, peer);
    commSetError(comm_, ncclRemoteError);
  }

  // While a rank thread drives, the proxy naps (it would take the core and
  // the frames from it), waking when the driver hands over or to look at stop.
  bool napWhileDriven() {
    const uint64_t d = driven_.load(std::memory_order_seq_cst);
    if (d == 0 || needProxy_.load(std::memory_order_seq_cst)) return false;
    std::atomic<uint64_t>* c = &driven_;
    std::atomic<uint32_t>* s = &drivenSleepers_;
    fifoSleep(&c, &s, &d, 1, kDrivenNapMs);
    return true;
  }

  void sendLoop() {
    Backoff b;
    for (;;) {
      if (stopping()) {
        sendAbortFrame();
        return;
      }
      if (napWhileDriven()) {
        b.reset();
        continue;
      }
      Moved m;
      uint64_t sent;
      {
        std::lock_guard<std::mutex> lock(mu_);
        m = moveSend();
        sent = sent_;
      }
      if (m == Moved::Failed) {
        fail("sending to");
        return;
      }
      if (m == Moved::Some) {
        b.reset();
        continue;
      }
      if (fifo.ctrl->tail.load(std::memory_order_acquire) > sent) {  // posted, but the socket is full
        waitSocket(POLLOUT);
      } else if (b.napping()) {  // idle: asleep until the sender posts (or stop wakes it)
        FifoSleepSet s;
        s.tail(fifo.ctrl, sent);
        s.sleep(kIdleCheckMs);
      } else {
        b.pause();
      }
    }
  }

  void recvLoop() {
    Backoff b;
    while (!stopping()) {
      if (napWhileDriven()) {
        b.reset();
        continue;
      }
      Moved m;
      uint64_t got;
      {
        std::lock_guard<std::mutex> lock(mu_);
        m = moveRecv();
        got = got_;
      }
      if (m == Moved::Closed) {  // closed between messages: an error only if someone waits for more
        fifo.ctrl->peerGone.store(1);
        return;
      }
      if (m == Moved::AbortFrame) {
        int32_t cause = -1;
        Deadline dl(nullptr, 1);
        if (socketRecv(fd_, &cause, sizeof(cause), dl) != ncclSuccess) cause = -1;
        fifoAbort(fifo.ctrl, cause >= 0 ? cause : peer);
        return;
      }
      if (m == Moved::Failed) {
        fail("receiving from");
        return;
      }
      if (m == Moved::Some) {
        b.reset();
        continue;
      }
      const uint64_t head = fifo.ctrl->head.load(std::memory_order_acquire);
      if (got - head < kSlots) {  // room: wait for the wire
        waitSocket(POLLIN);
      } else if (b.napping()) {  // full: asleep until the receiver drains a slot (or stop wakes it)
        FifoSleepSet s;
        s.head(fifo.ctrl, head);
        s.sleep(kIdleCheckMs);
      } else {
        b.pause();
      }
    }
  }

  ncclComm* comm_;
  int fd_;
  void* mem_ = nullptr;
  std::atomic<uint32_t> stop_{0};
  std::thread proxy_;
  std::mutex mu_;        // one mover at a time: the proxy or a rank thread in progress()
  uint64_t sent_ = 0;    // send: frames fully on the wire (under mu_)
  uint64_t got_ = 0;     // recv: frames fully in slots (under mu_)
  size_t off_ = 0;       // bytes of the current frame moved (under mu_)
  uint32_t size_ = 0;    // recv: the current frame's size (under mu_)
  bool broken_ = false;  // a socket error, an abort frame sent, or abandonFrom: no more frames (under mu_)
  bool torn_ = false;    // abandonFrom cut a frame short on the wire (under mu_)
  std::atomic<uint64_t> driven_{0};         // rank threads driving this connection (64 bits: fifoSleep's kind)
  std::atomic<uint32_t> drivenSleepers_{0};  // the proxy, asleep until they stop
  std::atomic<bool> needProxy_{false};       // a driver met a failure only the proxy reports
};

}  // namespace

namespace {

// Takes ownership of a connected, authenticated socket.
ncclResult_t netFromSocket(ncclComm* comm, int* fd, bool isSend, int peer, ConnPtr* out) {
  auto c = std::make_unique<NetConnection>(comm, *fd, isSend, peer);
  *fd = -1;
  NCCLCHECK(c->start());
  *out = std::move(c);
  return ncclSuccess;
}

bool netCanConnect(const ncclComm*, int, int tag) { return tag < kTagDevice; }

ncclResult_t netRecvSide(ncclComm* comm, int peer, int, int* fd, const Deadline& dl, ConnPtr* out) {
  NCCLCHECK(socketSend(*fd, &kNetTransport.code, 1, dl));  // before the socket carries frames
  return netFromSocket(comm, fd, false, peer, out);
}

ncclResult_t netSendSide(ncclComm* comm, int peer, int, int* fd, const Deadline&, ConnPtr* out) {
  return netFromSocket(comm, fd, true, peer, out);
}

}  // namespace

const Transport kNetTransport = {"net", 'N', netCanConnect, netRecvSide, netSendSide, nullptr};

}  // namespace accl
