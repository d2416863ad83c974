// The net transport: connections between hosts through the network layer's
// backend (net/net.h: ACCL's TCP backend or an NCCL net plugin). Each side
// keeps a FIFO in its own memory, and slots move between that FIFO and the
// backend (send side: each posted slot as one message; receive side: a
// receive posted into each free slot), so the algorithms see the same FIFO
// as with shared memory. The moving is non-blocking and done by whoever gets
// there first: the rank thread that posts or waits (Connection::progress),
// or the connection's proxy thread, which keeps it going while the rank
// computes and sleeps when idle. A small message thus crosses with no
// hand-over between threads.
//
// A device connector between hosts (tags >= kTagDevice) is the same
// connection with its FIFO in pinned host memory that kernels reach: the
// sending kernel writes a slot and its counters (DevCounters, in the FIFO's
// control page), the proxy sends it and raises head; the receiving proxy
// takes a message into a free slot and raises the counters' tail, and the
// kernel reads it and raises head. No thread of the rank takes part, and a
// kernel wakes no one, so the proxy polls (devNap).
//
// Set-up: the receiver listens on its device and answers on the set-up
// socket with the backend's handle; the sender connects to it; both finish
// without blocking (settle), all of a rank's connections together. The
// set-up socket stays as the connection's control line: a side that fails
// says so there ("rank N failed"), whatever the backend, and its closing
// tells the peer that this side is gone.
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "base/check.h"
#include "base/param.h"
#include "base/threads.h"
#include "base/wait.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/socket.h"
#include "core/comm.h"
#include "net/net.h"
#include "plugin/nccl_net.h"
#include "topo/topo.h"
#include "transport/connection.h"
#include "transport/dev_mem.h"
#include "transport/fifo_sleep.h"
#include "transport/transport.h"

namespace accl {
namespace {

// One device, merging `devs` where there are several and the backend can;
// devs[active, ...) stand by (failover).
int mergedDevice(NetBackend* net, const std::vector<int>& devs, int active = -1) {
  int vdev = -1;
  const int n = static_cast<int>(devs.size());
  if (active < 0 || active > n) active = n;
  if (n == 1 || (active == n ? net->makeVDevice(devs.data(), n, &vdev)
                             : net->makeVDeviceWithStandby(devs.data(), n, active, &vdev)) != ncclSuccess)
    return devs[0];
  return vdev;
}

// Without a topology (ranks whose hosts reported different NICs): ranks of
// one host take the devices in turn (local rank i the i-th), so that each
// rank's traffic leaves through a NIC of its own; where a host has more
// devices than ranks, each rank merges its share (devices i, i + L, ... of
// L local ranks, as many as the backend merges) into one, whose connections
// spread over all of them, where the backend can merge.
int deviceByLocalRank(const ncclComm* comm, NetBackend* net) {
  const int ndev = net->devices();
  int local = 0, locals = 0;
  for (int r = 0; r < comm->nranks; ++r)
    if (comm->peers[r].hostHash == comm->peers[comm->rank].hostHash) {
      local += r < comm->rank;
      ++locals;
    }
  if (ndev <= 0) return 0;
  if (locals >= ndev) return local % ndev;
  std::vector<int> devs;
  for (int d = local; d < ndev && static_cast<int>(devs.size()) < net->maxVDeviceNics(); d += locals) devs.push_back(d);
  return mergedDevice(net, devs);
}

// The control line's frames, three words each: what, an argument, and how
// many messages the sender had sent by then. A failing side sends
// kAbortFrame with the rank whose failure caused it (so a rank downstream of
// a failure learns its cause); a sender that closes normally sends
// kCloseFrame (so the receiver knows when it has them all, whatever the
// backend says of a closed connection). Either takes effect at the receiver
// once it has that many messages: the line must not overtake the data, as a
// frame in the data's own stream could not.
constexpr uint32_t kAbortFrame = 0xffffffffu;
constexpr uint32_t kCloseFrame = 0xfffffffeu;
// A sleeping proxy looks at the abort flags this often (a stop wakes it at once).
constexpr int kIdleCheckMs = 20;
// A proxy that left the connection to a rank thread looks again this often
// (hand-overs, failures, aborts and stops wake it at once).
constexpr int kDrivenNapMs = 1;
constexpr int kDataTag = 0;
// How long an abort frame waits for the messages sent before it, and a
// receiver whose peer died for those still on their way, once receives
// stand ready and nothing comes (the backend lost them, or has no more).
constexpr uint64_t kAbortDrainMs = 1000;
constexpr uint64_t kDeadDrainMs = 100;
// A proxy looks at its control line at least this often.
constexpr uint64_t kCtrlCheckMs = 5;
// A device connector's proxy polls its kernel's counters with naps this
// long, and a millisecond at a time once nothing moved for kDevIdleMs: a
// call after a longer pause starts up to 1 ms late.
constexpr long kDevNapNs = 20000;
constexpr uint64_t kDevIdleMs = 1000;
// Where in the FIFO's control page (after FifoCtrl and PullCtrl) a device
// connector keeps the kernel's counters.
constexpr size_t kDevCountersOffset = 2048;
static_assert(kDevCountersOffset >= kPullCtrlOffset + sizeof(PullCtrl) &&
              kDevCountersOffset + sizeof(DevCounters) <= 4096, "in the control page");


// The device of this rank's connection with `peer` (`send`: to it). Where
// the topology knows the hosts' rails (topo/topo.h), the NICs of the rails
// the two hosts share: a ring's hop, the only connection between its two
// hosts in its direction, takes all of them; others the sender's rail.
// Both ends pick alike, so lane j joins two NICs of one rail and plane.
int deviceOf(const ncclComm* comm, NetBackend* net, int peer, bool send, int tag) {
  if (comm->topo) {
    const int sender = send ? comm->rank : peer, receiver = send ? peer : comm->rank;
    std::string why;
    // A connection on one rail gets the next rail's ports to stand by where
    // it can fail over (ACCL_LANE_TIMEOUT_MS > 0) and has a socket a NIC
    // (NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD unset).
    int active = 0;
    const bool standby = paramInt(Param::LaneTimeoutMs) > 0 && paramInt(Param::SocketNthreads) <= 0 &&
                         paramInt(Param::NsocksPerthread) <= 0;
    const std::vector<int> devs =
        topoHopDevices(*comm->topo, sender, receiver, comm->rank, tag == kTagRing || tag == kTagDevRing,
                       net->maxVDeviceNics(), &why, standby ? &active : nullptr);
    const bool ours = std::all_of(devs.begin(), devs.end(), [&](int d) { return d >= 0 && d < net->devices(); });
    if (!devs.empty() && ours) {
      if (!why.empty() && comm->topo->crossNic == 0)
        WARN("rank %d: the network connection %s rank %d joins NICs of different rails: %s (NCCL_CROSS_NIC=0 "
             "asks for one rail; connect the rails above the hosts, or give the hosts a rail in common)",
             comm->rank, send ? "to" : "from", peer, why.c_str());
      else if (!why.empty())
        INFO(kNet, "rank %d: the network connection %s rank %d joins NICs of different rails: %s", comm->rank,
             send ? "to" : "from", peer, why.c_str());
      return mergedDevice(net, devs, active ? active : -1);
    }
  }
  return deviceByLocalRank(comm, net);
}

class NetConnection : public Connection {
 public:
  NetConnection(ncclComm* comm, NetBackend* net, int ctrl, bool send, int peer, int tag)
      : comm_(comm), net_(net), ctrl_(ctrl), dev_(deviceOf(comm, net, peer, send, tag)) {
    isSend = send;
    this->peer = peer;
    device = tag >= kTagDevice;
    size_t slot = comm->slotBytes;
    if (!device) {
      mem_ = aligned_alloc(4096, fifoBytes(slot));
    } else if (devHostAlloc(comm, fifoBytes(slot), "cudaHostAlloc (a device FIFO between hosts)", &mem_, &memDev_) ==
               ncclSuccess) {
      cnt_ = reinterpret_cast<DevCounters*>(static_cast<char*>(mem_) + kDevCountersOffset);
    }
    if (mem_) fifoInit(mem_, slot, &fifo);
    NetDeviceProps props;
    if (dev_ >= 0 && net->properties(dev_, &props) == ncclSuccess) devName_ = props.name;
    via_ = std::string("net (") + net->name() + " " + devName_ + ")";  // what messages say: the backend, the NICs
    kind = via_.c_str();
  }
  ~NetConnection() override {
    stop_.store(1);
    const bool aborting = mem_ && fifo.ctrl->abort.load() != 0;
    if (proxy_.joinable()) {
      // Aborting: the send proxy still tells the peer why (bounded by 1 s),
      // then exits by itself. Otherwise a wake (the send proxy's) or the
      // closing line (the receive proxy's poll) ends it.
      wakeProxy();
      if (!isSend) shutdown(ctrl_, SHUT_RDWR);
      proxy_.join();
    }
    if (isSend && data_ && !aborting) {  // a normal close: how many messages there were
      const uint32_t frame[3] = {kCloseFrame, 0, static_cast<uint32_t>(sent_)};
      (void)send(ctrl_, frame, sizeof(frame), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (progress_) net_->cancelConnect(progress_);
    if (mr_) (void)net_->deregMr(data_, mr_);
    if (data_) (void)(isSend ? net_->closeSend(data_) : net_->closeRecv(data_));
    if (listen_) (void)net_->closeListen(listen_);
    close(ctrl_);
    devTableFree(table_);
    if (device) devHostFree(mem_);
    else free(mem_);
  }

  // The receiver's side of the set-up: a listener on its device, whose handle
  // the sender needs.
  ncclResult_t listen(void* handle) {
    NCCLCHECK(checkMemory());
    return net_->listen(dev_, comm_->bootstrap->secret(), handle, &listen_);
  }
  void setHandle(const void* handle) { memcpy(handle_, handle, kNetHandleBytes); }
  int ctrlFd() const { return ctrl_; }

  ncclResult_t settle(bool* done) override {
    *done = data_ != nullptr;
    if (*done) return ncclSuccess;
    NCCLCHECK(checkMemory());
    if (isSend) NCCLCHECK(net_->connect(dev_, comm_->bootstrap->secret(), handle_, &progress_, &data_));
    else NCCLCHECK(net_->accept(listen_, &data_));
    if (!data_) {  // the peer, meanwhile, must not have failed or left (no message has come: at once)
      if (peerSpoke() == Spoke::Nothing) return ncclSuccess;
      if (abortPending_) fifoAbort(fifo.ctrl, abortCause_);
      WARN("rank %d: rank %d %s while its network connection %s this rank was being made", comm_->rank, peer,
           fifo.ctrl->abort.load() ? "failed" : "left", isSend ? "from" : "to");
      return ncclRemoteError;
    }
    if (listen_) {
      (void)net_->closeListen(listen_);
      listen_ = nullptr;
    }
    *done = true;
    // The slots, registered once: a plugin's messages go from and into them.
    if (net_->regMr(data_, fifo.data, kSlots * fifo.slotBytes, NCCL_PTR_HOST, &mr_) != ncclSuccess) {
      WARN("rank %d: %s could not register the FIFO of the connection %s rank %d (%zu bytes)", comm_->rank,
           net_->name(), isSend ? "to" : "from", peer, kSlots * fifo.slotBytes);
      return ncclSystemError;
    }
    if (device) NCCLCHECK(makeDevTable());
    return startThread(&proxy_,
                       [this] {
                         // A device connector's naps are its latency: within a microsecond, not 50.
                         if (device) (void)prctl(PR_SET_TIMERSLACK, 1000UL);
                         isSend ? sendLoop() : recvLoop();
                       },
                       "rank %d's proxy thread of a network connection %s rank %d (one per connection and direction)",
                       comm_->rank, isSend ? "to" : "from", peer);
  }

  void abort(int failedRank) override {
    fifoAbort(fifo.ctrl, failedRank);
    wakeProxy();
    // A send proxy tells the peer why and closes; a receiver tells it now
    // (its proxy only reads) and closes, which the peer's send proxy sees.
    if (!isSend) tellSenderAborted();
  }
  ncclResult_t drain() override {
    if (!isSend) return ncclSuccess;
    Deadline dl(&comm_->abortFlag);
    Backoff b;
    while (fifo.ctrl->head.load(std::memory_order_acquire) < postedTail()) {
      if (fifo.ctrl->peerGone.load() || fifo.ctrl->abort.load() || dl.aborted()) return ncclRemoteError;
      if (b.checkNow() && dl.expired()) return ncclTimeout;
      progress();
      b.pause();
    }
    // What the backend holds until its peer acknowledges it (failover: it
    // may still go again over another lane) gets as long as a lane takes to
    // be given up, and a second more.
    const uint64_t until = nowMs() + static_cast<uint64_t>(paramInt(Param::LaneTimeoutMs)) + 1000;
    while (data_ && nowMs() < until && !fifo.ctrl->peerGone.load() && !fifo.ctrl->abort.load() && !dl.aborted()) {
      ncclResult_t r;
      {
        std::lock_guard<std::mutex> lock(mu_);
        r = net_->progress(data_);
      }
      if (r != ncclInProgress) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return ncclSuccess;
  }
  // A rank thread waiting on this FIFO moves the messages itself when the
  // proxy is not at it: no hand-over between threads on the way.
  void progress() override {
    if (proxyMode_ == 2 || !data_ || !mu_.try_lock()) return;
    const Moved m = isSend ? moveSend() : moveRecv();
    mu_.unlock();
    if (m == Moved::Failed) {  // the proxy reports it, driven or not
      needProxy_.store(true, std::memory_order_seq_cst);
      wakeProxy();
    }
  }
  // While a rank thread drives (a wait on this FIFO, or for a rank bound to
  // one core its whole operation, coll/steps.h), the proxy leaves the
  // connection to it: it would only take the messages, or the core, from it.
  // The rank wakes it when it goes to sleep, or stops driving with messages
  // still to send; else the proxy looks again within kDrivenNapMs.
  void driving(bool on, bool handOver) override {
    if (on) {
      driven_.fetch_add(1, std::memory_order_seq_cst);
      return;
    }
    driven_.fetch_sub(1, std::memory_order_seq_cst);
    if (isSend && unsent()) wakeProxy();  // messages left: whether the driver sleeps or is done
    else if (handOver) fifoWakeSleepers(&driven_, &drivenSleepers_);
  }
  // The rank's own messages leave from its thread; what the backend would not
  // take waits for the driver's next wait or, with no driver, for the proxy.
  void posted(uint64_t tail) override {
    fifo.ctrl->tail.store(tail, std::memory_order_seq_cst);
    if (proxyMode_ != 0) wakeProxy();
    else if (unsent() && driven_.load(std::memory_order_seq_cst) == 0) wakeProxy();
  }
  // Where the backend reads a send's memory only in the calls a thread of
  // ours makes (ACCL's own without helper threads), an abandoned message is
  // never read again, so sends go straight from the caller's memory; a
  // backend with threads of its own sends from the slots.
  bool sendsFromMemory() const override { return isSend && !device && net_->readsSendsOnlyInCalls(); }
  DevChan* devTable() const override { return table_; }
  void abandonFrom() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t k = sent_; k < postedTail(); ++k)
      if (from[k % kSlots]) {
        broken_ = true;  // no more moving: the memory goes back to the caller
        return;
      }
  }

 private:
  // What one pass of moveSend/moveRecv did. Failures are left for the proxy,
  // which finds them again and reports them.
  enum class Moved { Failed = -1, Nothing = 0, Some = 1 };

  // The slots the sender posted, and a posted slot's size: a rank thread's
  // in the FIFO's control block, a kernel's in its counters.
  uint64_t postedTail() const {
    return cnt_ ? __atomic_load_n(&cnt_->tail, __ATOMIC_ACQUIRE) : fifo.ctrl->tail.load(std::memory_order_acquire);
  }
  uint32_t postedBytes(uint64_t k) const { return cnt_ ? cnt_->bytes[k % kSlots] : fifo.ctrl->bytes[k % kSlots]; }

  // The kernels' view of a device connector: its one channel.
  ncclResult_t makeDevTable() {
    char* base = static_cast<char*>(memDev_);
    DevChan ch{};
    ch.ctrl = reinterpret_cast<DevFifoCtrl*>(base);
    ch.slots = base + (fifo.data - static_cast<char*>(mem_));
    ch.cnt = reinterpret_cast<DevCounters*>(base + kDevCountersOffset);
    ch.slotBytes = fifo.slotBytes;
    ch.crossGpu = 1;  // host memory: the kernel's steps fence at system scope
    return devTableMake(comm_, peer, {ch}, nullptr, 0, &table_);
  }

  // A receiver's abort frame, and the control line's end (a receiver sends no
  // messages: the sender takes it at once).
  void tellSenderAborted() {
    const uint32_t frame[3] = {kAbortFrame, static_cast<uint32_t>(fifo.ctrl->failedRank.load()), 0};
    (void)send(ctrl_, frame, sizeof(frame), MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(ctrl_, SHUT_RDWR);
  }

  // How long a device connector's proxy may wait before it looks at the
  // kernel's counters again: see kDevNapNs.
  struct timespec devNapTime() const { return {0, nowMs() - movedMs_ > kDevIdleMs ? 1000000L : kDevNapNs}; }
  void devNap() const {
    const struct timespec ts = devNapTime();
    nanosleep(&ts, nullptr);
  }

  ncclResult_t checkMemory() const {
    if (mem_) return ncclSuccess;
    WARN("rank %d: no memory for the FIFO of a network connection %s rank %d (%zu bytes)", comm_->rank,
         isSend ? "to" : "from", peer, fifoBytes(comm_->slotBytes));
    return ncclSystemError;
  }

  // Wherever the proxy sleeps: on its FIFO's counter, or napping on a driver.
  void wakeProxy() {
    if (isSend) fifoWakeSleepers(&fifo.ctrl->tail, &fifo.ctrl->tailSleepers);
    else fifoWakeSleepers(&fifo.ctrl->head, &fifo.ctrl->headSleepers);
    fifoWakeSleepers(&driven_, &drivenSleepers_);
  }

  // Send side: moves what the backend takes now; whether posted messages are
  // left (or the proxy is at it, and will see them).
  bool unsent() {
    if (!data_ || !mu_.try_lock()) return true;
    const bool left = moveSend() == Moved::Failed || postedTail() > sent_;
    mu_.unlock();
    return left;
  }

  bool stopping() const {
    return stop_.load(std::memory_order_relaxed) || comm_->abortFlag.load() != 0 || fifo.ctrl->abort.load() != 0;
  }

  // Where slot k's payload is: the sender's memory, or the slot.
  const char* payload(uint64_t k) const { return from[k % kSlots] ? from[k % kSlots] : fifo.slot(k); }

  // Each posted slot goes as one message (issued_: handed to the backend;
  // sent_: done, so the slot is free again). Under mu_.
  Moved moveSend() {
    if (broken_) return Moved::Failed;
    Moved m = Moved::Nothing;
    for (const uint64_t tail = postedTail(); issued_ < tail;) {
      void* req = nullptr;
      const uint32_t bytes = postedBytes(issued_);
      if (net_->isend(data_, const_cast<char*>(payload(issued_)), bytes, kDataTag, mr_, &req) != ncclSuccess)
        return failed();
      if (!req) break;
      reqs_[issued_++ % kSlots] = req;
      m = Moved::Some;
    }
    while (sent_ < issued_) {
      int done = 0;
      size_t n = 0;
      if (net_->test(reqs_[sent_ % kSlots], &done, &n) != ncclSuccess) return failed();
      if (!done) break;
      fifoPostHead(fifo.ctrl, ++sent_);
      m = Moved::Some;
    }
    if (sent_ == issued_) {  // bytes the peer may lack (failover)
      const ncclResult_t r = net_->progress(data_);
      if (r != ncclSuccess && r != ncclInProgress) return failed();
    }
    return m;
  }

  // A receive stands in every free slot (posted_); got_ counts those done.
  // Under mu_.
  Moved moveRecv() {
    if (broken_) return Moved::Failed;
    Moved m = Moved::Nothing;
    while (posted_ - fifo.ctrl->head.load(std::memory_order_acquire) < kSlots) {
      void* req = nullptr;
      if (net_->irecv(data_, fifo.slot(posted_), fifo.slotBytes, kDataTag, mr_, &req) != ncclSuccess)
        return failed();
      if (!req) break;
      reqs_[posted_++ % kSlots] = req;
    }
    while (got_ < posted_) {
      int done = 0;
      size_t n = 0;
      if (net_->test(reqs_[got_ % kSlots], &done, &n) != ncclSuccess) return failed();
      if (!done) break;
      fifo.ctrl->bytes[got_ % kSlots] = static_cast<uint32_t>(n);
      if (cnt_) {  // the kernel's view: the size, then tail
        cnt_->bytes[got_ % kSlots] = static_cast<uint32_t>(n);
        __atomic_store_n(&cnt_->tail, got_ + 1, __ATOMIC_RELEASE);
      }
      fifoPostTail(fifo.ctrl, ++got_);
      m = Moved::Some;
    }
    return m;
  }

  Moved failed() {
    broken_ = true;  // the backend says a request failed once; it stays so for whichever thread moves next
    return Moved::Failed;
  }

  // Waits (unlocked) until the backend may move again, the control line
  // speaks, or a wake or stop; while a rank thread drives, until it stops.
  // Whether the control line has something to say (ctrlReady_).
  void waitMoving() {
    if (napWhileDriven()) return;
    // The backend's descriptors, then the control line (left out once it
    // closed: it would always be ready).
    constexpr int kMaxFds = 65;
    pollfd p[kMaxFds];
    int n;
    {
      std::lock_guard<std::mutex> lock(mu_);  // the backend's state is the mover's
      n = net_->pollFds(data_, p, kMaxFds - 1);
    }
    const int k = std::max(n, 0);
    p[k] = {peerClosed_ || peerDied_ ? -1 : ctrl_, POLLIN, 0};
    if (device) {  // the kernel's counters move without a wake: look again within a nap
      const struct timespec ts = devNapTime();
      (void)ppoll(p, k + 1, &ts, nullptr);
    } else {
      (void)poll(p, k + 1, n >= 0 ? kIdleCheckMs : 1);  // a backend without descriptors is polled every 1 ms
    }
    if (p[k].revents) ctrlReady_ = true;
  }

  // The control line, read as it comes (the proxy's, or the set-up's): an
  // abort frame (the FIFO aborts), a close frame (peerClosed_: the peer sent
  // closeAt_ messages in all, which may still be on their way), or its end
  // without one (peerDied_: the peer is gone; what the backend still holds
  // is taken, no more is waited for).
  enum class Spoke { Nothing, Abort, Closed };
  Spoke peerSpoke() {
    if (peerClosed_ || peerDied_) return Spoke::Closed;
    for (;;) {
      const ssize_t k = recv(ctrl_, reinterpret_cast<char*>(ctrlFrame_) + ctrlGot_, sizeof(ctrlFrame_) - ctrlGot_,
                             MSG_DONTWAIT);
      if (k < 0 && socketWouldBlock()) return Spoke::Nothing;
      if (k <= 0) {  // closed (or broken) with no close frame
        peerDied_ = true;
        return Spoke::Closed;
      }
      ctrlGot_ += static_cast<size_t>(k);
      if (ctrlGot_ < sizeof(ctrlFrame_)) continue;
      ctrlGot_ = 0;
      if (ctrlFrame_[0] == kAbortFrame) {
        abortPending_ = true;
        abortCause_ = static_cast<int32_t>(ctrlFrame_[1]) >= 0 ? static_cast<int>(ctrlFrame_[1]) : peer;
        abortAt_ = ctrlFrame_[2];
        return Spoke::Abort;
      }
      if (ctrlFrame_[0] == kCloseFrame) {
        peerClosed_ = true;
        closeAt_ = ctrlFrame_[2];
        return Spoke::Closed;
      }
      peerDied_ = true;  // junk: a peer that says this has nothing more to say
      return Spoke::Closed;
    }
  }

  // Whether the proxy looks at the control line now (a system call): when a
  // wait saw it ready, else every kCtrlCheckMs, also while a rank drives.
  bool ctrlDue() {
    const uint64_t now = nowMs();
    if (!ctrlReady_ && now - lastCtrlMs_ < kCtrlCheckMs) return false;
    ctrlReady_ = false;
    lastCtrlMs_ = now;
    return true;
  }

  void sendAbortFrame() {
    if (fifo.ctrl->abort.load() == 0 && comm_->abortFlag.load() == 0) return;  // a normal close
    Deadline dl(nullptr, 1);
    // Messages the backend has (a backend with threads of its own may still
    // be sending them) get until the deadline to finish, so that the peer
    // takes what was sent before the abort: the frame says how many.
    uint64_t sent;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        const bool failed = moveSend() == Moved::Failed;
        sent = sent_;
        if (failed || sent_ == issued_) break;
      }
      if (dl.expired()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const uint32_t frame[3] = {kAbortFrame, static_cast<uint32_t>(fifo.ctrl->failedRank.load()),
                               static_cast<uint32_t>(sent)};
    (void)socketSend(ctrl_, frame, sizeof(frame), dl);
    shutdown(ctrl_, SHUT_RDWR);
  }

  void fail(const char* what) {
    fifo.ctrl->peerGone.store(1);
    if (stopping()) return;
    WARN("rank %d: %s rank %d (%s, %s device %d: %s) failed: connection lost (peer process died or aborted)",
         comm_->rank, what, peer, comm_->peers[peer].hostname, net_->name(), dev_, devName_.c_str());
    // Named before the error spreads: the abort frames tell the other ranks
    // which rank failed (else they would name this one, which only noticed).
    commNoteFailedRank(comm_, peer);
    commSetError(comm_, ncclRemoteError);
  }

  // While a rank thread drives, the proxy naps (it would take the core and
  // the messages from it), waking when the driver hands over or to look at stop.
  bool napWhileDriven() {
    const uint64_t d = driven_.load(std::memory_order_seq_cst);
    if (proxyMode_ != 0 || d == 0 || needProxy_.load(std::memory_order_seq_cst)) return false;
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
      // The receiver's word: an abort frame (then this one aborts too) or its going away.
      if (ctrlDue()) {
        const Spoke s = peerSpoke();
        if (s == Spoke::Abort) {
          fifoAbort(fifo.ctrl, abortCause_);
          continue;
        }
        if (s == Spoke::Closed) {
          fifo.ctrl->peerGone.store(1);  // an error only for a sender that still waits on it
          return;
        }
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
        if (device) movedMs_ = nowMs();
        b.reset();
        continue;
      }
      if (postedTail() > sent) {  // posted, not yet gone
        waitMoving();
      } else if (b.napping() && device) {  // a kernel posts without waking anyone
        devNap();
      } else if (b.napping()) {  // idle: asleep until the sender posts (or stop wakes it)
        FifoSleepSet s;
        s.tail(fifo.ctrl, sent);
        s.sleep(kIdleCheckMs);
      } else {
        b.pause();
      }
    }
  }

  // Whether the stream from the peer has ended for this receiver: an abort
  // frame's messages are all here (the FIFO aborts), a close frame's too, or
  // the peer died; where messages may still be on their way, once the
  // receives have stood in free slots for a while and none came (`quiet`:
  // the time since a message came or the FIFO was full).
  bool streamEnded(uint64_t got) {
    const uint64_t now = nowMs();
    const bool roomy = got - fifo.ctrl->head.load(std::memory_order_acquire) < kSlots;
    if (quietSinceMs_ == 0 || got != lastGot_ || !roomy) quietSinceMs_ = now;
    lastGot_ = got;
    const uint64_t quiet = now - quietSinceMs_;
    if (abortPending_ && (got >= abortAt_ || quiet >= kAbortDrainMs)) {
      fifoAbort(fifo.ctrl, abortCause_);
      return true;
    }
    if (!abortPending_ && ((peerClosed_ && got >= closeAt_) || (peerDied_ && quiet >= kDeadDrainMs))) {
      fifo.ctrl->peerGone.store(1);  // an error only for a wait that needs more than is here
      return true;
    }
    return false;
  }

  void recvLoop() {
    Backoff b;
    while (!stopping()) {
      if (ctrlDue()) (void)peerSpoke();
      if (abortPending_ || peerClosed_ || peerDied_) {
        uint64_t g;
        {
          std::lock_guard<std::mutex> lock(mu_);
          g = got_;
        }
        if (streamEnded(g)) return;
      }
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
      if (m == Moved::Failed) {
        // The backend's connection ended: the control line says why (an
        // abort frame), or that the peer left or died (then not an error,
        // unless someone waits for more).
        if (!peerClosed_ && !peerDied_ && !abortPending_) {
          pollfd p = {ctrl_, POLLIN, 0};
          (void)poll(&p, 1, 100);
        }
        const Spoke why = peerSpoke();
        if (abortPending_) fifoAbort(fifo.ctrl, abortCause_);  // nothing more can come
        else if (why == Spoke::Closed) fifo.ctrl->peerGone.store(1);
        else fail("receiving from");
        return;
      }
      if (m == Moved::Some) {
        if (device) movedMs_ = nowMs();
        b.reset();
        continue;
      }
      const uint64_t head = fifo.ctrl->head.load(std::memory_order_acquire);
      if (got - head < kSlots) {  // room: wait for the wire
        waitMoving();
      } else if (b.napping() && device) {  // a kernel drains without waking anyone
        devNap();
      } else if (b.napping()) {  // full: asleep until the receiver drains a slot (or stop wakes it)
        FifoSleepSet s;
        s.head(fifo.ctrl, head);
        s.sleep(kIdleCheckMs);
      } else {
        b.pause();
      }
    }
    // A kernel that failed aborted this FIFO itself (failKernel), and nothing
    // else tells the sender, whose kernel may wait for room: say it here, as
    // abort() does for host threads.
    if (device && fifo.ctrl->abort.load() && !stop_.load()) tellSenderAborted();
  }

  ncclComm* comm_;
  NetBackend* net_;
  int ctrl_;           // the set-up socket, kept as the control line
  int dev_;            // this side's device of the backend
  std::string devName_;  // its name (a merged device's: its NICs, nic0+nic1)
  std::string via_;      // "net (<backend> <device>)": Connection::kind
  void* listen_ = nullptr;  // the receiver's, until accept
  void* data_ = nullptr;    // the backend's send or receive comm, once settled
  void* mr_ = nullptr;      // the slots' registration with it
  alignas(8) char handle_[kNetHandleBytes] = {};  // the sender's: the receiver's handle (a plugin's progress too)
  void* progress_ = nullptr;  // the sender's: its connect's progress, the backend's
  void* mem_ = nullptr;
  // A device connector's: the FIFO as kernels see it, the kernel's counters
  // (in the control page), the channel table.
  void* memDev_ = nullptr;
  DevCounters* cnt_ = nullptr;
  DevChan* table_ = nullptr;
  uint64_t movedMs_ = 0;   // the proxy's last move (device connectors: how long to nap)
  std::atomic<uint32_t> stop_{0};
  std::thread proxy_;
  std::mutex mu_;          // one mover at a time: the proxy or a rank thread in progress()
  void* reqs_[kSlots] = {};  // the backend's request of each slot in flight (under mu_)
  uint64_t issued_ = 0;    // send: messages handed to the backend (under mu_)
  uint64_t sent_ = 0;      // send: messages done (under mu_)
  uint64_t posted_ = 0;    // recv: receives handed to the backend (under mu_)
  uint64_t got_ = 0;       // recv: messages in slots (under mu_)
  bool broken_ = false;    // a failed request, or abandonFrom: no more moving (under mu_)
  // The control line, as its one reader (the set-up, then the proxy) sees it.
  uint32_t ctrlFrame_[3] = {};
  size_t ctrlGot_ = 0;
  bool peerClosed_ = false;  // a close frame came: closeAt_ messages in all
  uint64_t closeAt_ = 0;
  bool peerDied_ = false;    // the line ended with no close frame
  bool abortPending_ = false;  // an abort frame came: it takes effect at abortAt_ messages (abortDue)
  int abortCause_ = -1;
  uint64_t abortAt_ = 0;
  uint64_t lastGot_ = 0;        // recv: what streamEnded saw last,
  uint64_t quietSinceMs_ = 0;   // and since when no message came while there was room
  bool ctrlReady_ = false;   // the proxy's last wait saw the control line ready
  uint64_t lastCtrlMs_ = 0;
  std::atomic<uint64_t> driven_{0};          // rank threads driving this connection (64 bits: fifoSleep's kind)
  std::atomic<uint32_t> drivenSleepers_{0};  // the proxy, asleep until they stop
  std::atomic<bool> needProxy_{false};       // a driver met a failure only the proxy reports
  const int proxyMode_ = static_cast<int>(paramInt(Param::NetProxy));
};

NetBackend* backendOrWarn(const ncclComm* comm) {
  NetBackend* net = comm->net ? comm->net : netBackend();
  if (!net) WARN("rank %d: no network backend (NCCL_NET)", comm->rank);
  return net;
}

// Host FIFOs with any peer; device connectors with a peer on another host
// (those of one host are CUDA IPC's).
bool netCanConnect(const ncclComm* comm, int peer, int tag) {
  return tag < kTagDevice || comm->peers[peer].hostHash != comm->peers[comm->rank].hostHash;
}

ncclResult_t netRecvSide(ncclComm* comm, int peer, int tag, int* fd, const Deadline& dl, ConnPtr* out) {
  NetBackend* net = backendOrWarn(comm);
  if (!net) return ncclInvalidUsage;
  auto c = std::make_unique<NetConnection>(comm, net, *fd, false, peer, tag);
  *fd = -1;  // the control line now
  char answer[1 + kNetHandleBytes] = {kNetTransport.code};
  NCCLCHECK(c->listen(answer + 1));
  NCCLCHECK(socketSend(c->ctrlFd(), answer, sizeof(answer), dl));
  *out = std::move(c);
  return ncclSuccess;
}

ncclResult_t netSendSide(ncclComm* comm, int peer, int tag, int* fd, const Deadline& dl, ConnPtr* out) {
  NetBackend* net = backendOrWarn(comm);
  if (!net) return ncclInvalidUsage;
  auto c = std::make_unique<NetConnection>(comm, net, *fd, true, peer, tag);
  *fd = -1;
  char handle[kNetHandleBytes];
  NCCLCHECK(socketRecv(c->ctrlFd(), handle, sizeof(handle), dl));
  c->setHandle(handle);
  *out = std::move(c);
  return ncclSuccess;
}

}  // namespace

const Transport kNetTransport = {"net", 'N', netCanConnect, netRecvSide, netSendSide, nullptr};

}  // namespace accl
