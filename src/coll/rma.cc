// One-sided operations on windows (coll/rma.h says how they travel).
#include "coll/rma.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "base/check.h"
#include "base/fork_safe.h"
#include "base/threads.h"
#include "base/wait.h"
#include "bootstrap/bootstrap.h"
#include "coll/dev_comm.h"
#include "coll/host_direct.h"
#include "coll/rma_dev.h"
#include "coll/steps.h"
#include "core/comm.h"
#include "transport/connection.h"
#include "transport/connections.h"
#include "transport/fifo_sleep.h"
#include "transport/peer_life.h"

namespace accl {
namespace {

constexpr uint32_t kHeaderMagic = 0x616d7261;  // "arma"
constexpr int kNoWindow = -1;                  // a bare signal
// What a rank does in a window allgather (so that mismatched calls are caught).
constexpr uint64_t kRegister = 0x6765722d6e6977ull, kDeregister = 0x6765726465642d6eull;
// What memory a window is: none (size 0: fits either kind), host, device, or
// device memory this rank could not share (reported; every rank then fails).
enum WindowKind : int32_t { kEmpty = 0, kHost = 1, kDevice = 2, kUnshareable = 3 };
const char* kindName(int32_t k) { return k == kHost ? "host" : "device"; }

// The first slot of every message.
struct Header {
  uint32_t magic;
  int32_t window;  // index, or kNoWindow
  uint64_t offset;
  uint64_t bytes;
};

// Counts a waiting thread for as long as it lives.
struct Waiting {
  explicit Waiting(std::atomic<int>* n) : n_(n) { n_->fetch_add(1); }
  ~Waiting() { n_->fetch_sub(1); }
  std::atomic<int>* n_;
};

// Every window handed out and not yet freed, in all communicators: a handle
// is looked up here before anything reads through it (a stale one would read
// freed memory).
std::mutex liveMu;
std::mutex& liveLock() { return liveMu; }
const HeldAcrossFork<liveLock> liveFreeAtFork;
std::set<const ncclWindow_vidmem*>& live() {
  static auto* s = new std::set<const ncclWindow_vidmem*>();  // never destroyed: destroys may run at exit
  return *s;
}

void handOut(ncclWindow_vidmem* w) {
  std::lock_guard<std::mutex> lock(liveMu);
  live().insert(w);
}

void retire(ncclWindow_vidmem* w) {
  {
    std::lock_guard<std::mutex> lock(liveMu);
    live().erase(w);
  }
  w->magic = 0;
  delete w;
}

}  // namespace

bool rmaWindowOf(const ncclWindow_vidmem* win, ncclComm** comm) {
  std::lock_guard<std::mutex> lock(liveMu);
  if (!live().count(win)) return false;
  if (*comm && win->comm != *comm) return false;
  *comm = win->comm;
  return true;
}

class Rma {
 public:
  explicit Rma(ncclComm* comm)
      : comm_(comm), left_(new std::atomic<bool>[comm->nranks]()), arrived_(comm->nranks, 0),
        consumed_(comm->nranks, 0), sent_(comm->nranks, 0) {
    for (int r = 0; r < comm->nranks; ++r) sendMu_.emplace_back(new std::mutex());
  }
  ~Rma() { stop(); }

  // Collective (from the first registration): a connection each way with every peer.
  ncclResult_t connect();
  void stop();

  ncclResult_t put(int peer, const ncclWindow_vidmem* win, size_t offset, const void* data, size_t bytes,
                   const char* opName);
  // To another rank over its connection: window `index` (or kNoWindow).
  ncclResult_t send(int peer, int index, size_t offset, const void* data, size_t bytes, const char* opName);
  ncclResult_t wait(const ncclWaitSignalDesc_t* descs, int n);
  // Messages this rank sent to each rank so far.
  std::vector<uint64_t> sentCounts();
  // Until `expected[q]` messages from each rank q have landed here.
  ncclResult_t landed(const std::vector<uint64_t>& expected, const char* opName);

  std::mutex winMu;  // guards windows (the receiver thread looks them up)
  std::vector<ncclWindow_vidmem*> windows;
  std::atomic<int32_t> kind{kEmpty};  // of every window so far (kHost or kDevice once one has memory)
  RmaDevPtr dev;          // device mode: signal arrays and mappings (coll/rma_dev.h)
  std::atomic<RmaDev*> devWatch{nullptr};  // dev, for the receiver thread

 private:
  struct Inbound {  // a message being received
    bool inHeader = false;
    Header h{};
    char* dst = nullptr;  // NULL: the data is dropped (a bad put, already reported)
    bool toDevice = false;  // dst is in a device window
    size_t done = 0;
  };
  void receive();
  ncclResult_t startMessage(int peer, const char* slot, Inbound* in);
  void raise(int peer);
  // Rank `peer` left and still owes this rank messages: a WARN, and the
  // wait fails (the communicator does not: waits on others may still end
  // well). Under sigMu_.
  ncclResult_t owedByLeft(int peer, uint64_t owed, const char* opName);

  ncclComm* comm_;
  std::vector<Connection*> sends_, recvs_;  // by peer (NULL for this rank)
  std::vector<std::unique_ptr<std::mutex>> sendMu_;  // one sender at a time per peer
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> waiters_{0};  // threads in wait() or landed(): the receiver then watches the peers
  // Peers that left cleanly (destroyed their communicator, or their process
  // ended) with nothing of theirs half-received: no failure unless a wait
  // still needs messages from them, which the waiter decides.
  std::unique_ptr<std::atomic<bool>[]> left_;
  std::mutex sigMu_;
  std::condition_variable sigCv_;
  std::vector<uint64_t> arrived_, consumed_;  // messages (= signals) by peer (guarded by sigMu_)
  std::vector<uint64_t> sent_;                // messages sent, by peer (guarded by sigMu_)
};

void RmaDeleter::operator()(Rma* r) const { delete r; }

ncclResult_t Rma::connect() {
  std::vector<int> peers;
  for (int r = 0; r < comm_->nranks; ++r)
    if (r != comm_->rank) peers.push_back(r);
  std::vector<Connection*> s, v;
  NCCLCHECK(getConnections(comm_, peers, peers, kTagRma, &s, &v));
  sends_.assign(comm_->nranks, nullptr);
  recvs_.assign(comm_->nranks, nullptr);
  for (size_t i = 0; i < peers.size(); ++i) {
    sends_[peers[i]] = s[i];
    recvs_[peers[i]] = v[i];
  }
  if (peers.empty()) return ncclSuccess;  // alone: puts to itself are copies
  const ncclResult_t r =
      startThread(&thread_, [this] { receive(); }, "rank %d's receiver of one-sided operations", comm_->rank);
  if (r != ncclSuccess) commSetError(comm_, r);  // its peers connected and would wait for it
  return r;
}

void Rma::stop() {
  stopping_.store(true);
  for (Connection* c : recvs_)
    if (c) fifoWake(&c->fifo.ctrl->tail);  // the receiver may be asleep
  if (thread_.joinable()) thread_.join();
  sigCv_.notify_all();
  // The communicator frees the connections next (commFree): a second stop,
  // from ~Rma, must not wake them.
  recvs_.clear();
}

void Rma::raise(int peer) {
  std::lock_guard<std::mutex> lock(sigMu_);
  ++arrived_[peer];
  sigCv_.notify_all();
}

ncclResult_t Rma::startMessage(int peer, const char* slot, Inbound* in) {
  memcpy(&in->h, slot, sizeof(Header));
  in->done = 0;
  in->dst = nullptr;
  if (in->h.magic != kHeaderMagic) {
    WARN("ncclPutSignal (%s, rank %d): a malformed one-sided message from rank %d", comm_->name.c_str(),
         comm_->rank, peer);
    return ncclInternalError;
  }
  if (in->h.window == kNoWindow) return ncclSuccess;
  std::lock_guard<std::mutex> lock(winMu);
  const ncclWindow_vidmem* w =
      in->h.window >= 0 && in->h.window < static_cast<int>(windows.size()) ? windows[in->h.window] : nullptr;
  if (!w || in->h.offset > w->size || in->h.bytes > w->size - in->h.offset) {
    WARN("ncclPutSignal (%s, rank %d): rank %d put %llu bytes at offset %llu into window #%d, which this rank %s",
         comm_->name.c_str(), comm_->rank, peer, static_cast<unsigned long long>(in->h.bytes),
         static_cast<unsigned long long>(in->h.offset), in->h.window,
         w ? "registered smaller" : "has not registered (or deregistered)");
    return ncclInvalidUsage;  // the data is dropped; the signal still counts, so no waiter hangs
  }
  in->dst = static_cast<char*>(w->base) + in->h.offset;
  in->toDevice = w->device;
  return ncclSuccess;
}

// The receiver thread: whatever arrived on any peer's connection, in order.
// While idle and someone waits for signals, it checks about every 100 ms that
// no peer failed, so that the waiter learns of it at once instead of at its
// deadline. A peer that aborted fails the communicator; one that left (closed
// its connection, or its process ended) between messages is marked, and
// fails only a wait that still needs its messages. (Device waits cannot say
// which peers they need: for them any peer that left fails the communicator.)
// Waiting for messages is normal here, so there is no deadline.
void Rma::receive() {
  Steps steps(comm_, "ncclPutSignal (receiving)");
  std::vector<Inbound> in(comm_->nranks);
  Backoff backoff;
  auto lastCheck = std::chrono::steady_clock::now();
  auto failed = [&] {
    std::lock_guard<std::mutex> lock(sigMu_);
    sigCv_.notify_all();  // waiters see the communicator's error
  };
  while (!stopping_.load(std::memory_order_relaxed)) {
    bool moved = false;
    for (int p = 0; p < comm_->nranks; ++p) {
      Connection* c = recvs_[p];
      if (!c) continue;
      Inbound& m = in[p];
      while (!stopping_.load(std::memory_order_relaxed) && steps.recvReady(c)) {
        const char* data = nullptr;
        if (!m.inHeader) {
          if (steps.recvSlot(c, sizeof(Header), &data) != ncclSuccess) return failed();  // reported
          ncclResult_t r = startMessage(p, data, &m);
          steps.release(c);
          if (r == ncclInternalError) {
            commSetError(comm_, r);
            return failed();
          }
          if (r != ncclSuccess) commSetError(comm_, r);
          m.inHeader = true;
        } else {
          const size_t n = std::min<size_t>(c->fifo.slotBytes, m.h.bytes - m.done);
          if (steps.recvSlot(c, n, &data) != ncclSuccess) return failed();
          if (m.dst && !m.toDevice) memcpy(m.dst + m.done, data, n);
          if (m.dst && m.toDevice && rmaDevLand(comm_, devWatch.load(), m.dst + m.done, data, n) != ncclSuccess) {
            commSetError(comm_, ncclUnhandledCudaError);  // reported; the rest of this put is dropped
            m.dst = nullptr;
          }
          steps.release(c);
          m.done += n;
        }
        if (m.done == m.h.bytes) {  // landed: count its signal
          m.inHeader = false;
          raise(p);
          // Device windows (kind is stored after this rank's registration
          // returns, and a peer's put may land before: not host is enough).
          if (kind.load() != kHost && devWatch.load() && rmaDevRaise(comm_, devWatch.load(), p) != ncclSuccess)
            commSetError(comm_, ncclUnhandledCudaError);  // reported
        }
        moved = true;
      }
    }
    if (moved) {
      backoff.reset();
      continue;
    }
    auto now = std::chrono::steady_clock::now();
    const bool devWaiting = rmaDevWaiting(devWatch.load());
    const bool waiting = waiters_.load() > 0 || devWaiting;
    if (waiting && now - lastCheck > std::chrono::milliseconds(100) && !comm_->abortFlag.load()) {
      lastCheck = now;
      Steps probe(comm_, "ncclWaitSignal (receiving)");  // a fresh deadline: only the failure checks count
      for (Connection* c : recvs_) {
        if (!c || left_[c->peer].load()) continue;
        const FifoCtrl* ctrl = c->fifo.ctrl;
        const char* why = peerGone(comm_, c->peer);  // died, or (another PID namespace) exited or destroyed
        const bool gone = ctrl->peerGone.load() || why;
        if (gone && !ctrl->abort.load() && !devWaiting && !in[c->peer].inHeader && !steps.recvReady(c)) {
          std::lock_guard<std::mutex> lock(sigMu_);
          left_[c->peer].store(true);
          sigCv_.notify_all();  // a waiter that needs its messages fails
          continue;
        }
        ncclResult_t r = probe.check(c);
        // A message it sent before it went is drained first.
        if (r == ncclSuccess && why && !steps.recvReady(c)) r = probe.failGone(c, why);
        if (r != ncclSuccess) return failed();  // reported: the communicator is failed
      }
    }
    if (backoff.yielded()) {
      // Idle: asleep until a peer posts to one of the connections (or stop
      // wakes it).
      FifoSleepSet s;
      for (Connection* c : recvs_)
        if (c) s.tail(c->fifo.ctrl, c->step);  // slots drained: a tail past it is a message
      s.sleep(100);  // 100 ms: the peer checks, and a stop that raced past its wake
    } else {
      backoff.pause();
    }
  }
}

ncclResult_t Rma::put(int peer, const ncclWindow_vidmem* win, size_t offset, const void* data, size_t bytes,
                      const char* opName) {
  if (peer != comm_->rank) return send(peer, win ? win->index : kNoWindow, offset, data, bytes, opName);
  {
    std::lock_guard<std::mutex> lock(sigMu_);
    ++sent_[peer];
  }
  if (bytes) memmove(static_cast<char*>(win->base) + offset, data, bytes);  // to this rank's own window: a copy
  raise(peer);
  return ncclSuccess;
}

ncclResult_t Rma::send(int peer, int index, size_t offset, const void* data, size_t bytes, const char* opName) {
  {
    std::lock_guard<std::mutex> lock(sigMu_);
    ++sent_[peer];
  }
  Connection* c = sends_[peer];
  std::lock_guard<std::mutex> lock(*sendMu_[peer]);
  Steps steps(comm_, opName);
  char* slot = nullptr;
  NCCLCHECK(steps.waitSend(c, &slot));
  const Header h{kHeaderMagic, index, offset, bytes};
  memcpy(slot, &h, sizeof h);
  steps.post(c, sizeof h);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min<size_t>(c->fifo.slotBytes, bytes - done);
    NCCLCHECK(steps.waitSend(c, &slot));
    memcpy(slot, static_cast<const char*>(data) + done, n);
    steps.post(c, n);
    done += n;
  }
  return ncclSuccess;
}

// Consumes nothing unless every entry is satisfied, so a failed wait loses no signal.
ncclResult_t Rma::wait(const ncclWaitSignalDesc_t* descs, int n) {
  std::vector<uint64_t> need(comm_->nranks, 0);
  for (int i = 0; i < n; ++i) need[descs[i].peer] += static_cast<uint64_t>(descs[i].opCnt);
  Deadline deadline(&comm_->abortFlag);
  Waiting waiting(&waiters_);
  std::unique_lock<std::mutex> lock(sigMu_);
  for (;;) {
    int short_ = -1;  // the first peer still owing signals
    for (int p = 0; p < comm_->nranks; ++p) {
      const uint64_t have = arrived_[p] - consumed_[p];
      if (have >= need[p]) continue;
      if (left_[p].load()) return owedByLeft(p, need[p] - have, "ncclWaitSignal");
      if (short_ < 0) short_ = p;
    }
    if (short_ < 0) break;
    int async = comm_->asyncError.load();
    if (async != ncclSuccess && async != ncclInProgress) {
      WARN("ncclWaitSignal (%s, rank %d): the communicator failed while waiting for signals from rank %d",
           comm_->name.c_str(), comm_->rank, short_);
      return static_cast<ncclResult_t>(async);
    }
    if (deadline.aborted() || stopping_.load()) {
      WARN("ncclWaitSignal (%s, rank %d): the communicator was aborted", comm_->name.c_str(), comm_->rank);
      return ncclInvalidUsage;
    }
    if (comm_->revoked.load()) {  // with peers their connections stop too; alone, only this says so
      WARN("ncclWaitSignal (%s, rank %d): the communicator was revoked (ncclCommRevoke)", comm_->name.c_str(),
           comm_->rank);
      return ncclInvalidUsage;
    }
    if (deadline.expired()) {
      WARN("ncclWaitSignal (%s, rank %d of %d): timed out (ACCL_TIMEOUT) waiting for %llu signal(s) from rank %d "
           "(%llu arrived so far)", comm_->name.c_str(), comm_->rank, comm_->nranks,
           static_cast<unsigned long long>(need[short_]), short_,
           static_cast<unsigned long long>(arrived_[short_] - consumed_[short_]));
      commSetError(comm_, ncclTimeout);
      return ncclTimeout;
    }
    sigCv_.wait_for(lock, std::chrono::milliseconds(deadline.pollMs(10)));
  }
  for (int p = 0; p < comm_->nranks; ++p) consumed_[p] += need[p];
  return ncclSuccess;
}

ncclResult_t Rma::owedByLeft(int peer, uint64_t owed, const char* opName) {
  const PeerInfo& p = comm_->peers[peer];
  WARN("%s (%s, rank %d of %d): rank %d (pid %d on %s) left (destroyed its communicator, or its process ended) "
       "still owing this rank %llu one-sided message(s)", opName, comm_->name.c_str(), comm_->rank, comm_->nranks,
       peer, p.pid, p.hostname, static_cast<unsigned long long>(owed));
  return ncclRemoteError;
}

std::vector<uint64_t> Rma::sentCounts() {
  std::lock_guard<std::mutex> lock(sigMu_);
  return sent_;
}

ncclResult_t Rma::landed(const std::vector<uint64_t>& expected, const char* opName) {
  Deadline deadline(&comm_->abortFlag);
  Waiting waiting(&waiters_);
  std::unique_lock<std::mutex> lock(sigMu_);
  for (int q = 0; q < comm_->nranks; ++q) {
    while (arrived_[q] < expected[q]) {
      if (left_[q].load()) return owedByLeft(q, expected[q] - arrived_[q], opName);
      int async = comm_->asyncError.load();
      if (async != ncclSuccess && async != ncclInProgress) return static_cast<ncclResult_t>(async);
      if (deadline.aborted() || deadline.expired()) {
        WARN("%s (%s, rank %d): %llu one-sided message(s) from rank %d never arrived%s", opName,
             comm_->name.c_str(), comm_->rank, static_cast<unsigned long long>(expected[q] - arrived_[q]), q,
             deadline.aborted() ? " (aborted)" : " (ACCL_TIMEOUT)");
        return deadline.aborted() ? ncclInvalidUsage : ncclTimeout;
      }
      sigCv_.wait_for(lock, std::chrono::milliseconds(deadline.pollMs(10)));
    }
  }
  return ncclSuccess;
}

namespace {

// What each rank puts into a registration's allgather.
struct RegEntry {
  uint64_t what;  // kRegister
  int64_t index;
  uint64_t size;
  int32_t kind;
  int32_t flags;
  RmaDevExport dev;  // device mode
  HostDirectExport host;  // host memory: where the other processes map it
};

// Rank q made another collective window call than this rank (a registration
// against a deregistration): their exchanges differ in size, so the
// communicator's bootstrap streams no longer line up, and a rank still waiting
// in the exchange would wait until ACCL_TIMEOUT. Stop the communicator: those
// ranks see its connections close now.
ncclResult_t windowCallsDiffer(ncclComm* comm) {
  commSetError(comm, ncclInvalidUsage);
  comm->bootstrap->shutdownAll();
  return ncclInvalidUsage;
}

// Checks a registration's allgather: every rank at the same registration, and
// one kind of memory on all ranks and in all of the communicator's windows
// (`kind` so far).
ncclResult_t checkRegistration(ncclComm* comm, int index, int32_t kind, const std::vector<RegEntry>& all,
                               int32_t* agreed) {
  const char* fn = "ncclCommWindowRegister";
  *agreed = kind;
  for (int q = 0; q < comm->nranks; ++q) {
    const uint64_t w = all[q].what;
    const int64_t i = all[q].index;
    const int32_t k = all[q].kind;
    if (w != kRegister || i != index) {
      WARN("%s (%s, rank %d): rank %d is at its registration #%lld but this rank at #%d: every rank must register "
           "(and deregister) windows in the same order", fn, comm->name.c_str(), comm->rank, q,
           static_cast<long long>(i), index);
      return w != kRegister ? windowCallsDiffer(comm) : ncclInvalidUsage;
    }
    if (all[q].flags != all[comm->rank].flags) {
      WARN("%s (%s, rank %d): rank %d registers its window with flags 0x%x, this rank with 0x%x: every rank must "
           "pass the same flags", fn, comm->name.c_str(), comm->rank, q, all[q].flags, all[comm->rank].flags);
      return ncclInvalidUsage;
    }
    if (k == kUnshareable) {
      WARN("%s (%s, rank %d): rank %d could not share its device window (its WARN says why)", fn, comm->name.c_str(),
           comm->rank, q);
      return ncclInvalidUsage;
    }
    if (k == kEmpty) continue;
    if (*agreed != kEmpty && k != *agreed) {
      WARN("%s (%s, rank %d): rank %d registers %s memory where %s memory is registered: a communicator's windows "
           "must all be host memory or all device memory", fn, comm->name.c_str(), comm->rank, q, kindName(k),
           kindName(*agreed));
      return ncclInvalidUsage;
    }
    *agreed = k;
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t rmaRegister(ncclComm* comm, void* buff, size_t size, int flags, ncclWindow_vidmem** out) {
  NCCLCHECK(devBeforeHostOp(comm));  // staged device work also makes connections
  if (!comm->rma) {
    comm->rma.reset(new Rma(comm));
    ncclResult_t r = comm->rma->connect();
    if (r != ncclSuccess) {
      comm->rma.reset();
      return r;
    }
  }
  Rma& rma = *comm->rma;
  int32_t kind = size == 0 ? kEmpty : comm->deviceMode && devBuffer(buff) ? kDevice : kHost;
  if (kind == kEmpty) buff = nullptr;
  std::vector<RegEntry> all(comm->nranks);
  RegEntry& mine = all[comm->rank];
  if (comm->deviceMode) {  // every rank shares its signal array, whatever its window
    rmaDevExport(comm, &rma.dev, kind == kDevice ? buff : nullptr, &mine.dev);
    rma.devWatch.store(rma.dev.get());
    if (!mine.dev.ok && kind != kHost) kind = kUnshareable;
  }
  // In the table before this rank joins the allgather: a peer may put into the
  // window as soon as its allgather returns, which needs this rank's part.
  auto* w = new ncclWindow_vidmem();
  w->magic = kWindowMagic;
  w->comm = comm;
  w->base = buff;
  w->size = size;
  w->flags = flags;
  {
    std::lock_guard<std::mutex> lock(rma.winMu);
    w->index = static_cast<int>(rma.windows.size());
    rma.windows.push_back(w);
  }
  mine.what = kRegister;
  mine.index = w->index;
  mine.size = size;
  mine.kind = kind;
  mine.flags = flags;
  if ((flags & NCCL_WIN_COLL_SYMMETRIC) && kind == kHost) mine.host = hostDirectExport(buff, size);
  int32_t agreed = kEmpty;
  ncclResult_t r = comm->bootstrap->allgather(all.data(), sizeof(RegEntry));
  if (r == ncclSuccess) r = checkRegistration(comm, w->index, rma.kind.load(), all, &agreed);
  if (r == ncclSuccess && agreed == kDevice) {
    // Maps every peer's window; then every rank learns whether all could.
    std::vector<RmaDevExport> exports;
    for (const RegEntry& e : all) exports.push_back(e.dev);
    r = rmaDevAttach(comm, rma.dev.get(), w, exports);
    std::vector<int32_t> ok(comm->nranks, 0);
    ok[comm->rank] = r == ncclSuccess;
    ncclResult_t g = comm->bootstrap->allgather(ok.data(), sizeof(int32_t));
    for (int q = 0; g == ncclSuccess && r == ncclSuccess && q < comm->nranks; ++q) {
      if (!ok[q]) {
        WARN("ncclCommWindowRegister (%s, rank %d): rank %d could not map the device windows (its WARN says why)",
             comm->name.c_str(), comm->rank, q);
        r = ncclInvalidUsage;
      }
    }
    if (r == ncclSuccess) r = g;
    if (r != ncclSuccess) rmaDevDetach(rma.dev.get(), w);
  }
  if (r == ncclSuccess && agreed == kHost && (flags & NCCL_WIN_COLL_SYMMETRIC)) {
    std::vector<HostDirectExport> exports;
    for (const RegEntry& e : all) exports.push_back(e.host);
    r = hostDirectAttach(comm, w, exports);
  }
  if (r != ncclSuccess) {
    std::lock_guard<std::mutex> lock(rma.winMu);
    rma.windows[w->index] = nullptr;
    delete w;
    return r;
  }
  rma.kind.store(agreed);
  for (const RegEntry& e : all) w->sizes.push_back(e.size);  // peers only put after their allgather: read-only now
  handOut(w);
  *out = w;
  return ncclSuccess;
}

ncclResult_t rmaDeregister(ncclComm* comm, ncclWindow_vidmem* win) {
  Rma& rma = *comm->rma;
  // Every rank says which window it drops and how many messages it sent to
  // each rank; each then waits until all sent to it have landed, so none is
  // dropped with the window. Row of rank q: kDeregister, index, sent[0..n-1].
  // Device windows: this rank's puts are stream work, finished first, so that
  // after the allgather no rank writes into the window any more. A failure
  // there is reported after the allgather, which the other ranks wait for.
  const ncclResult_t before = win->device ? devWait(comm) : devBeforeHostOp(comm);
  const int n = comm->nranks;
  const size_t row = static_cast<size_t>(n) + 2;
  std::vector<uint64_t> all(row * n);
  std::vector<uint64_t> mine = rma.sentCounts();
  uint64_t* me = all.data() + row * comm->rank;
  me[0] = kDeregister;
  me[1] = static_cast<uint64_t>(win->index);
  std::copy(mine.begin(), mine.end(), me + 2);
  NCCLCHECK(comm->bootstrap->allgather(all.data(), row * sizeof(uint64_t)));
  NCCLCHECK(before);
  std::vector<uint64_t> toMe(n);
  for (int q = 0; q < n; ++q) {
    const uint64_t* theirs = all.data() + row * q;
    if (theirs[0] != kDeregister || theirs[1] != me[1]) {
      WARN("ncclCommWindowDeregister (%s, rank %d): rank %d is not deregistering window #%d at the same time "
           "(every rank must register and deregister windows in the same order)", comm->name.c_str(), comm->rank,
           q, win->index);
      return theirs[0] != kDeregister ? windowCallsDiffer(comm) : ncclInvalidUsage;
    }
    toMe[q] = theirs[2 + comm->rank];
  }
  NCCLCHECK(rma.landed(toMe, "ncclCommWindowDeregister"));
  if (win->device) NCCLCHECK(rmaDevFlush(comm, rma.dev.get()));  // the landed puts' copies are done
  {
    std::lock_guard<std::mutex> lock(rma.winMu);
    rma.windows[win->index] = nullptr;  // indices stay: they name windows on every rank
  }
  rmaDevDetach(rma.dev.get(), win);
  hostDirectDetach(win);
  retire(win);
  return ncclSuccess;
}

bool rmaOnDevice(const ncclComm* comm) { return comm->rma && comm->rma->kind.load() == kDevice; }

bool rmaHasWindow(ncclComm* comm, const ncclWindow_vidmem* win) {
  if (!comm->rma) return false;
  std::lock_guard<std::mutex> lock(comm->rma->winMu);
  const auto& w = comm->rma->windows;
  return std::find(w.begin(), w.end(), win) != w.end();
}

RmaDev* rmaDevOf(const ncclComm* comm) { return rmaOnDevice(comm) ? comm->rma->dev.get() : nullptr; }

bool rmaFindSymmetric(ncclComm* comm, const void* p, size_t bytes, int* index, size_t* offset) {
  if (!comm->rma || !p || bytes == 0) return false;
  Rma& rma = *comm->rma;
  const char* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(rma.winMu);
  for (const ncclWindow_vidmem* w : rma.windows) {
    if (!w || !(w->device || w->hostDirect) || !(w->flags & NCCL_WIN_COLL_SYMMETRIC)) continue;
    const char* base = static_cast<const char*>(w->base);
    if (c < base || c >= base + w->size || bytes > w->size - static_cast<size_t>(c - base)) continue;
    *index = w->index;
    *offset = static_cast<size_t>(c - base);
    return true;
  }
  return false;
}

char* rmaHostPeer(ncclComm* comm, int index, int rank) {
  if (!comm->rma) return nullptr;
  Rma& rma = *comm->rma;
  std::lock_guard<std::mutex> lock(rma.winMu);
  if (index < 0 || index >= static_cast<int>(rma.windows.size())) return nullptr;
  const ncclWindow_vidmem* w = rma.windows[index];
  return w && w->hostDirect ? w->hostPeerBase[rank] : nullptr;
}

ncclResult_t rmaSend(ncclComm* comm, int peer, int index, size_t offset, const void* data, size_t bytes,
                     const char* opName) {
  return comm->rma->send(peer, index, offset, data, bytes, opName);
}

ncclResult_t rmaPut(ncclComm* comm, int peer, const ncclWindow_vidmem* win, size_t offset, const void* data,
                    size_t bytes, void* stream, const char* opName) {
  if (rmaOnDevice(comm)) return rmaDevPut(comm, comm->rma->dev.get(), peer, win, offset, data, bytes, stream, opName);
  return comm->rma->put(peer, win, offset, data, bytes, opName);
}

ncclResult_t rmaWait(ncclComm* comm, const ncclWaitSignalDesc_t* descs, int n, void* stream) {
  if (rmaOnDevice(comm)) return rmaDevWait(comm, comm->rma->dev.get(), descs, n, stream);
  return comm->rma->wait(descs, n);
}

void rmaStop(ncclComm* comm) {
  if (!comm->rma) return;
  Rma& rma = *comm->rma;
  rma.stop();
  hostDirectStop(comm);  // ranks still in a direct collective leave it instead of waiting for this one
  // This rank's puts may still be copying through the mappings closed below
  // (abort; destroy finished them already).
  if (rma.dev) (void)devWait(comm);
  {
    std::lock_guard<std::mutex> lock(rma.winMu);
    for (ncclWindow_vidmem*& w : rma.windows) {
      if (!w) continue;
      rmaDevDetach(rma.dev.get(), w);
      hostDirectDetach(w);
      retire(w);
      w = nullptr;
    }
  }
  rma.devWatch.store(nullptr);
  rma.dev.reset();  // after the kernels that use it (the communicator's stop flag ends waiting ones)
}

}  // namespace accl
