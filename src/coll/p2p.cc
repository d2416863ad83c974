// Point-to-point: the sends and receives of a group run together, so pairs may
// be issued in any order (ring shifts, all-to-all) without deadlock. Each peer
// and direction is a queue of messages in call order; one progress loop moves
// whatever can move on every queue, chunk by chunk, and waits (bounded) only
// when nothing could move. Messages to self are copied directly.
//
// Pulled sends. A send of at least ACCL_P2P_DIRECT_MIN_BYTES to a rank that
// reaches this rank's memory (a rank of this process, or of another process
// of this host through cross memory attach) posts one frame that says where
// its buffer is, instead of its data. The receiver copies the message from
// there into its buffer, chunk by chunk from the front, while the sender,
// which must wait for it anyway, writes chunks from the back into the
// receiver's buffer (PullCtrl, in the FIFO's shared control page). Both cores
// copy, and each byte is copied once, where the slots copy it twice (into the
// slot, out of it). The receiver releases the frame once every chunk is in;
// the send is done then.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/wait.h"
#include "coll/coll.h"
#include "coll/cross_copy.h"
#include "coll/dev_comm.h"
#include "coll/p2p_reach.h"
#include "coll/steps.h"
#include "core/comm.h"
#include "transport/connection.h"
#include "transport/connections.h"
#include "transport/fifo_sleep.h"

namespace accl {
namespace {

struct Message {
  const CollArgs* op = nullptr;
  char* buf = nullptr;
  size_t bytes = 0;
  size_t done = 0;
  bool copy = false;  // a send whose buffer a receive of the call writes: into the slots, never sent from buf
  // Pulled (above): a send posted as the pull frame at step `frame`; a
  // receive served by the frame at `frame`, from the sender's buffer at
  // `src`, of which this rank copied `copied` bytes.
  bool pulled = false;
  uint64_t frame = 0;
  uint64_t src = 0;
  size_t chunk = 0;  // what one claim moves: each end works it out from the size (not from the shared page)
  size_t copied = 0;
  uint64_t seenWritten = 0;  // a pulled receive's last look at the sender's bytes (PullCtrl::written)
  uint64_t seenHead = 0;     // a pulled send's last look at the FIFO's head
  uint64_t seenFrame = 0;    // and at PullCtrl::frame (the receiver describes the message there)
  // A receive's: the sends of the call whose buffers it overlaps (in place);
  // it writes a part only once they have taken what was there.
  std::vector<const Message*> after;
  // Whether this receive may write its bytes [at, at + n) now.
  bool mayWrite(size_t at, size_t n) const {
    for (const Message* s : after)
      if (rangesOverlap(s->buf + s->done, s->bytes - s->done, buf + at, n)) return false;  // still to be taken
    return true;
  }
};

// One peer and direction: its messages in call order, from `head` on still to move.
struct Queue {
  int peer = -1;
  Connection* conn = nullptr;
  std::vector<Message> msgs;
  size_t head = 0;
  bool open() const { return head < msgs.size(); }
};

// One direction's queues of a call: the first `used` of `all`, in ascending
// peer order once sorted (as every rank asks for its connections).
struct Queues {
  std::vector<Queue> all;
  size_t used = 0;
  std::vector<int> at;  // by peer: its queue's index while the call builds them, else -1
  std::vector<int> peers;
  std::vector<Connection*> conns;

  Queue* begin() { return all.data(); }
  Queue* end() { return all.data() + used; }
  void add(int peer, const Message& m) {
    if (at.size() <= static_cast<size_t>(peer)) at.resize(peer + 1, -1);
    if (at[peer] < 0) {
      if (all.size() == used) all.emplace_back();
      Queue& q = all[used];
      q.peer = peer;
      q.msgs.clear();
      q.head = 0;
      at[peer] = static_cast<int>(used++);
    }
    all[at[peer]].msgs.push_back(m);
  }
  void sortByPeer() {
    for (Queue& q : *this) at[q.peer] = -1;
    std::sort(begin(), end(), [](const Queue& x, const Queue& y) { return x.peer < y.peer; });
    peers.clear();
    for (Queue& q : *this) peers.push_back(q.peer);
  }
};

// A thread's queues, kept from call to call so that a small group allocates
// nothing (runP2p never runs twice at once on one thread).
struct Scratch {
  Queues send, recv;
  std::vector<const CollArgs*> selfSends, selfRecvs;
  // Starts a call; `at` stays all -1 between calls, even when one fails midway.
  void reset() {
    for (Queues* qs : {&send, &recv}) {
      for (Queue& q : *qs)
        if (static_cast<size_t>(q.peer) < qs->at.size()) qs->at[q.peer] = -1;
      qs->used = 0;
    }
    selfSends.clear();
    selfRecvs.clear();
  }
};

// One call per runP2p to reach it: the library's thread-locals cost a call
// (__tls_get_addr) at every access the compiler cannot prove repeated.
__attribute__((noinline)) Scratch& threadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

size_t bytesOf(const CollArgs& a) { return a.count * typeSize(a.type); }

// The sends to self pair with the receives from self, in call order.
ncclResult_t checkSelf(ncclComm* comm, const std::vector<const CollArgs*>& sends,
                       const std::vector<const CollArgs*>& recvs) {
  if (sends.size() != recvs.size()) {
    WARN("%s (%s, rank %d): %zu send(s) to self but %zu receive(s) from self in one group", sends.empty()
             ? recvs[0]->opName : sends[0]->opName, comm->name.c_str(), comm->rank, sends.size(), recvs.size());
    return ncclInvalidUsage;
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    if (bytesOf(*sends[i]) != bytesOf(*recvs[i])) {
      WARN("ncclSend/ncclRecv (%s, rank %d): send to self of %zu bytes matched with a receive of %zu bytes",
           comm->name.c_str(), comm->rank, bytesOf(*sends[i]), bytesOf(*recvs[i]));
      return ncclInvalidUsage;
    }
  }
  return ncclSuccess;
}

void copyToSelf(const std::vector<const CollArgs*>& sends, const std::vector<const CollArgs*>& recvs) {
  for (size_t i = 0; i < sends.size(); ++i)
    if (sends[i]->sendbuff != recvs[i]->recvbuff) memmove(recvs[i]->recvbuff, sends[i]->sendbuff, bytesOf(*sends[i]));
}

// Whether a buffer of a message to or from self overlaps one of another
// peer's: then the copy to self comes first, as it always did.
bool selfOverlaps(const Scratch& s) {
  for (const std::vector<const CollArgs*>* ops : {&s.selfSends, &s.selfRecvs})
    for (const CollArgs* a : *ops) {
      const char* buf = static_cast<const char*>(a->kind == CollKind::Send ? a->sendbuff : a->recvbuff);
      for (const Queues* qs : {&s.send, &s.recv})
        for (size_t i = 0; i < qs->used; ++i)
          for (const Message& m : qs->all[i].msgs)
            if (rangesOverlap(buf, bytesOf(*a), m.buf, m.bytes)) return true;
    }
  return false;
}

// A rank moves its open connections' frames itself while the call spins
// (as its collectives' waits do), and their proxies stand aside
// (Connection::driving); it hands them back when it sleeps and when it ends.
// Measured between 2 emulated hosts (docs/perf.md): an 8 B sendrecv 37-43 us
// when only ranks bound to one core did so (a proxy's wake-up per message),
// 17-20 us now; with 2 ranks per host on 2 cores, level.
class Driver {
 public:
  ~Driver() { handOver(false); }
  // Every connection it drives keeps moving, also once its queue is done
  // (a send's last frames may still be in its FIFO).
  void spin(Queues& sendQ, Queues& recvQ) {
    for (Queues* qs : {&sendQ, &recvQ})
      for (Queue& q : *qs)
        if (q.open() && std::find(driven_.begin(), driven_.end(), q.conn) == driven_.end()) {
          q.conn->driving(true, false);
          driven_.push_back(q.conn);
        }
    for (Connection* c : driven_) c->progress();
  }
  void handOver(bool sleeping) {
    for (Connection* c : driven_) c->driving(false, sleeping);
    driven_.clear();
  }

 private:
  std::vector<Connection*> driven_;
};

// A send whose buffer overlaps a receive of the same call (an in-place
// sendrecv) sends what the buffer held before the call: it is copied into
// the slots, never sent from the buffer, and the receive writes each part
// only once the send has copied it (Message::mayWrite).
void markOverlaps(Queues& sendQ, Queues& recvQ) {
  const char *lo = nullptr, *hi = nullptr;  // every receive lies in [lo, hi): most sends are outside
  for (Queue& r : recvQ)
    for (const Message& w : r.msgs) {
      lo = lo ? std::min<const char*>(lo, w.buf) : w.buf;
      hi = std::max<const char*>(hi, w.buf + w.bytes);
    }
  for (Queue& s : sendQ)
    for (Message& m : s.msgs) {
      if (!lo || !rangesOverlap(m.buf, m.bytes, lo, static_cast<size_t>(hi - lo))) continue;
      for (Queue& r : recvQ)
        for (Message& w : r.msgs)
          if (rangesOverlap(m.buf, m.bytes, w.buf, w.bytes)) {
            m.copy = true;
            w.after.push_back(&m);
          }
    }
}

// ---- Pulled sends (above)

// A claim word: closed (a call left on an error: no more claims), the
// frame's tag, the next chunk from the front, the end of those from the
// back. The tag keeps a late compare-and-swap off the next pulled message
// of the FIFO; closing keeps both ends, which say what each end took.
constexpr uint64_t kChunkMask = (uint64_t{1} << 24) - 1;
constexpr uint64_t kClaimClosed = uint64_t{1} << 63;
uint64_t frameTag(uint64_t step) { return (step + 1) & 0x7fff; }
uint64_t packClaim(uint64_t tag, uint64_t lo, uint64_t hi) { return tag << 48 | lo << 24 | hi; }
uint64_t claimTag(uint64_t c) { return c >> 48 & 0x7fff; }
uint64_t claimLo(uint64_t c) { return c >> 24 & kChunkMask; }
uint64_t claimHi(uint64_t c) { return c & kChunkMask; }
bool claimable(uint64_t c) { return !(c & kClaimClosed) && claimLo(c) < claimHi(c); }

// What one claim moves: 128 KiB, as the direct collectives' chunks through
// cross memory attach (each costs a system call), and more for a message of
// more than kChunkMask of those, which the claim word could not count.
size_t pullChunkBytes(size_t bytes) {
  return std::max<size_t>(128 << 10, ((bytes + kChunkMask - 1) / kChunkMask + 4095) & ~size_t{4095});
}

// Whether this send goes pulled: large enough, not an in-place send (whose
// buffer a receive of the call overwrites), over shared memory, to a rank
// that reaches this one's memory.
bool pullable(ncclComm* comm, const Queue& q, const Message& m) {
  return comm->p2pPullMinBytes > 0 && m.bytes >= static_cast<size_t>(comm->p2pPullMinBytes) && !m.copy &&
         q.conn->sharedCtrl && (sameProcess(comm, q.peer) || p2pReachesProcess(comm, q.peer));
}

// The peer failed, or this rank did (the FIFO is aborted): the error that
// names it, instead of the copy's own.
bool aborted(Connection* c) { return c->fifo.ctrl->abort.load(std::memory_order_acquire) != 0; }

// n bytes between this rank's memory at `local` and the peer's at `remote`
// (toPeer: into the peer's).
ncclResult_t peerCopy(ncclComm* comm, Steps& steps, Connection* c, bool toPeer, uint64_t remote, char* local,
                      size_t n) {
  if (sameProcess(comm, c->peer)) {
    void* peer = reinterpret_cast<void*>(remote);
    memmove(toPeer ? peer : local, toPeer ? local : peer, n);
    return ncclSuccess;
  }
  size_t done = 0;
  const int err = crossCopy(localPid(comm, c->peer), toPeer, remote, local, n, &done);
  if (err == 0) return ncclSuccess;
  if (aborted(c)) return steps.check(c);  // the peer left the call: its buffer may be gone
  if (err == ESRCH) return steps.failGone(c, "its process has died");
  char why[200];
  snprintf(why, sizeof(why), "failed: %s its buffer at 0x%llx (%zu bytes, through cross memory attach) after %zu "
           "bytes: %s%s", toPeer ? "writing into" : "reading", static_cast<unsigned long long>(remote), n, done,
           strerror(err), err == EFAULT ? " (a buffer on one side is not all mapped, or not writable)" : "");
  return steps.fail(c, err == EFAULT ? ncclInvalidArgument : ncclSystemError, why);
}

// A claim word that names a chunk past the message: the shared page was
// written by something else than the two ends' compare-and-swaps.
ncclResult_t badClaim(Steps& steps, Connection* c, uint64_t claim) {
  char why[160];
  snprintf(why, sizeof(why), "failed: the claim word of its straight copy (0x%016llx) names a chunk past the "
           "message (its shared control page was overwritten)", static_cast<unsigned long long>(claim));
  return steps.fail(c, ncclInternalError, why);
}

// The sender's turn: one frame that says where the message is.
void postPull(ncclComm* comm, Steps& steps, Queue& q, Message& m) {
  const PullFrame f{reinterpret_cast<uintptr_t>(m.buf), m.bytes};
  memcpy(q.conn->fifo.slot(q.conn->step), &f, sizeof(f));
  m.pulled = true;
  m.frame = q.conn->step;
  m.chunk = pullChunkBytes(m.bytes);
  steps.post(q.conn, kPullFrame | sizeof(f));
  if (!comm->p2pPullAnnounced) {
    comm->p2pPullAnnounced = true;
    INFO(kColl, "%s rank %d: %s of %zu bytes to rank %d goes straight from buffer to buffer (first such send; %s)",
         comm->name.c_str(), comm->rank, m.op->opName, m.bytes, q.peer,
         sameProcess(comm, q.peer) ? "a rank of this process" : "through cross memory attach");
  }
}

// While its pulled send waits: one chunk from the back of the message into
// the receiver's buffer, once the receiver has described it and allows it.
ncclResult_t writeChunk(ncclComm* comm, Steps& steps, Connection* c, Message& m, bool* moved) {
  PullCtrl& pc = pullCtrl(c->fifo);
  if ((m.seenFrame = pc.frame.load(std::memory_order_acquire)) != m.frame + 1 || !pc.senderWrites)
    return ncclSuccess;
  const uint64_t tag = frameTag(m.frame);
  uint64_t claim = pc.claim.load(std::memory_order_relaxed);
  do {
    if (claimTag(claim) != tag || !claimable(claim)) return ncclSuccess;
  } while (!pc.claim.compare_exchange_weak(claim, claim - 1, std::memory_order_relaxed));
  const size_t at = (claimHi(claim) - 1) * m.chunk;
  if (at >= m.bytes) return badClaim(steps, c, claim);
  const size_t n = std::min<size_t>(m.chunk, m.bytes - at);
  const ncclResult_t r = peerCopy(comm, steps, c, true, pc.dst + at, m.buf + at, n);
  fifoAdvance(&pc.written, &pc.writtenSleepers, pc.written.load(std::memory_order_relaxed) + n);  // only it adds
  *moved = true;
  return r;
}

// The receiver's turn, at a pull frame: checks it against the receive and
// describes the receive for the sender, unless the sender withdrew it.
ncclResult_t startPull(Steps& steps, Connection* c, Message& m) {
  PullFrame f;
  memcpy(&f, c->fifo.slot(c->step), sizeof(f));
  if (m.done != 0 || f.bytes != m.bytes) {
    char why[200];
    snprintf(why, sizeof(why), "sent %llu bytes where %zu were expected (do all ranks call the same operations "
             "with the same counts?)", static_cast<unsigned long long>(f.bytes), m.bytes - m.done);
    return steps.fail(c, ncclInvalidUsage, why);
  }
  // A call that failed left the FIFO aborted, and this frame perhaps
  // described already: never describe it again.
  if (aborted(c)) return steps.check(c);
  PullCtrl& pc = pullCtrl(c->fifo);
  uint64_t before = pc.frame.load(std::memory_order_acquire);
  if (before == c->step + 1) return steps.fail(c, ncclInternalError, "failed: this pull frame was taken up before");
  const size_t chunk = pullChunkBytes(m.bytes);
  pc.dst = reinterpret_cast<uintptr_t>(m.buf);
  pc.senderWrites = m.after.empty();  // in place, this rank writes each part once its sends took it
  pc.written.store(0, std::memory_order_relaxed);
  pc.read.store(0, std::memory_order_relaxed);
  pc.claim.store(packClaim(frameTag(c->step), 0, (m.bytes + chunk - 1) / chunk), std::memory_order_relaxed);
  if (before == (kPullWithdrawn | (c->step + 1)) ||
      !pc.frame.compare_exchange_strong(before, c->step + 1, std::memory_order_acq_rel)) {
    if (aborted(c)) return steps.check(c);
    return steps.fail(c, ncclRemoteError, "failed: the sender withdrew its send (its call failed)");
  }
  fifoWakeSleepers(&pc.frame, &pc.frameSleepers);  // a sender asleep: it may help now
  m.pulled = true;
  m.frame = c->step;
  m.chunk = chunk;
  m.src = f.src;
  return ncclSuccess;
}

// One chunk of a pulled receive from the front; once none is left to take
// and the sender's are in, the frame is released (*finished): the send is done.
ncclResult_t pullChunk(ncclComm* comm, Steps& steps, Connection* c, Message& m, bool* moved, bool* finished) {
  PullCtrl& pc = pullCtrl(c->fifo);
  m.seenWritten = pc.written.load(std::memory_order_acquire);  // what a sleep waits to see move
  uint64_t claim = pc.claim.load(std::memory_order_relaxed);
  while (claimable(claim)) {
    const size_t at = claimLo(claim) * m.chunk;
    if (at >= m.bytes) return badClaim(steps, c, claim);
    const size_t n = std::min<size_t>(m.chunk, m.bytes - at);
    if (!m.mayWrite(at, n)) return ncclSuccess;  // in place: a send of the call has yet to take these bytes
    if (aborted(c)) return steps.check(c);  // the sender left: its buffer may be gone
    if (!pc.claim.compare_exchange_weak(claim, claim + (uint64_t{1} << 24), std::memory_order_relaxed)) continue;
    const ncclResult_t r = peerCopy(comm, steps, c, false, m.src + at, m.buf + at, n);
    pc.read.fetch_add(n, std::memory_order_release);
    NCCLCHECK(r);
    m.copied += n;
    *moved = true;
    return ncclSuccess;  // a chunk per pass: the other queues, and this rank's own pulled sends, take turns
  }
  if (m.copied + m.seenWritten < m.bytes) return ncclSuccess;
  // A sender that failed may have given its buffer back while this rank
  // read it; it says so (abort) before it returns.
  if (aborted(c)) return steps.check(c);
  steps.release(c);
  m.done = m.bytes;
  *moved = *finished = true;
  return ncclSuccess;
}

// Until `done` reaches `want`: a chunk the other end took is still in flight.
// It takes microseconds; the wait gives up after 10 s for a rank of this
// process, 2 s for one of another (with a WARN: a rank stopped longer, by
// SIGSTOP say, may then still copy that chunk, into this rank's buffer or
// out of it, when it resumes).
void awaitChunk(ncclComm* comm, const Queue& q, const std::atomic<uint64_t>& done, uint64_t want) {
  const int seconds = sameProcess(comm, q.peer) ? 10 : 2;
  const Deadline::Clock::time_point until = Deadline::Clock::now() + std::chrono::seconds(seconds);
  Backoff b;
  while (done.load(std::memory_order_acquire) < want && processAlive(localPid(comm, q.peer)) &&
         Deadline::Clock::now() < until)
    b.pause();
  if (done.load(std::memory_order_acquire) < want)
    WARN("%s (%s, rank %d): rank %d did not finish a chunk of its straight copy within %d s of this call's error",
         q.msgs[q.head].op->opName, comm->name.c_str(), comm->rank, q.peer, seconds);
}

// The call ends with an error while a peer may still copy into a pulled
// receive or out of a pulled send: it takes no more chunks (and a send not
// yet described is withdrawn), and the chunk it may be copying lands first,
// so that no rank touches this call's buffers once it returned.
void settlePulls(ncclComm* comm, Queues& sendQ, Queues& recvQ) {
  auto revoke = [](PullCtrl& pc) { return pc.claim.fetch_or(kClaimClosed, std::memory_order_relaxed); };
  for (Queue& q : recvQ) {
    if (!q.open() || !q.msgs[q.head].pulled) continue;
    const Message& m = q.msgs[q.head];
    PullCtrl& pc = pullCtrl(q.conn->fifo);
    const uint64_t claim = revoke(pc);  // the sender's chunks: from hi on
    awaitChunk(comm, q, pc.written, m.bytes - std::min<size_t>(m.bytes, claimHi(claim) * m.chunk));
  }
  for (Queue& q : sendQ) {
    if (!q.open() || !q.msgs[q.head].pulled) continue;
    const Message& m = q.msgs[q.head];
    if (q.conn->fifo.ctrl->head.load(std::memory_order_acquire) > m.frame) continue;  // released: done with
    PullCtrl& pc = pullCtrl(q.conn->fifo);
    uint64_t frame = pc.frame.load(std::memory_order_acquire);
    if (frame != m.frame + 1 &&
        pc.frame.compare_exchange_strong(frame, kPullWithdrawn | (m.frame + 1), std::memory_order_acq_rel))
      continue;  // withdrawn before the receiver took it up
    const uint64_t claim = revoke(pc);  // the receiver's chunks: up to lo
    awaitChunk(comm, q, pc.read, std::min<size_t>(m.bytes, claimLo(claim) * m.chunk));
  }
}

// Nothing moved for a while: asleep until a peer frees a slot of a blocked send
// or posts to a waiting receive (transport/fifo_sleep.h), at most 10 ms, so
// that the deadline and liveness checks go on.
void sleepOnQueues(Queues& sendQ, Queues& recvQ) {
  FifoSleepSet s;
  for (Queue& q : sendQ) {
    if (!q.open()) continue;
    FifoCtrl* ctrl = q.conn->fifo.ctrl;
    const Message& m = q.msgs[q.head];
    if (m.pulled) {  // until released, or described (then it helps)
      s.head(ctrl, m.seenHead);
      if (m.seenFrame != m.frame + 1) s.frame(pullCtrl(q.conn->fifo), m.seenFrame);
    } else {
      s.head(ctrl, q.conn->step - kSlots);  // nothing moved: the FIFO is full, head is here
    }
  }
  for (Queue& q : recvQ) {
    if (!q.open()) continue;
    FifoCtrl* ctrl = q.conn->fifo.ctrl;
    if (q.msgs[q.head].pulled)  // the sender's last chunks
      s.written(pullCtrl(q.conn->fifo), q.msgs[q.head].seenWritten);
    else if (ctrl->tail.load(std::memory_order_acquire) == q.conn->step)  // drained: a tail past it is data
      s.tail(ctrl, q.conn->step);
  }
  s.sleep(10);
}

// Each queue's connection: from the communicator's lists by peer, or made
// (every missing one at once, as its peers ask for theirs) and listed.
ncclResult_t connect(ncclComm* comm, Queues& sendQ, Queues& recvQ) {
  using List = std::atomic<Connection*>*;
  const std::pair<Queues*, List> sides[2] = {{&sendQ, comm->p2pSendTo.get()}, {&recvQ, comm->p2pRecvFrom.get()}};
  bool known = true;
  for (auto [qs, list] : sides)
    for (Queue& q : *qs) known = known && list && (q.conn = list[q.peer].load(std::memory_order_acquire));
  if (known) return ncclSuccess;
  NCCLCHECK(getConnections(comm, sendQ.peers, recvQ.peers, kTagP2p, &sendQ.conns, &recvQ.conns));
  for (auto [qs, list] : sides) {
    const std::vector<Connection*>& conns = qs == &sendQ ? sendQ.conns : recvQ.conns;
    for (size_t i = 0; i < qs->used; ++i) {
      qs->all[i].conn = conns[i];
      if (list) list[qs->peers[i]].store(conns[i], std::memory_order_release);
    }
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t runP2p(ncclComm* comm, const std::vector<CollArgs>& ops) {
  size_t onDevice = 0;
  for (const CollArgs& a : ops) onDevice += a.onDevice;
  if (onDevice == ops.size()) return devRunP2p(comm, ops);
  if (onDevice) {
    WARN("%s (%s, rank %d): a group mixes sends/receives of device buffers with ones of host buffers; "
         "use one kind per group", ops[0].opName, comm->name.c_str(), comm->rank);
    return ncclInvalidUsage;
  }
  NCCLCHECK(devBeforeHostOp(comm));
  Scratch& scratch = threadScratch();
  scratch.reset();
  Queues& sendQ = scratch.send;
  Queues& recvQ = scratch.recv;
  for (const CollArgs& a : ops) {
    bool send = a.kind == CollKind::Send;
    if (a.root == comm->rank) {
      (send ? scratch.selfSends : scratch.selfRecvs).push_back(&a);
      continue;
    }
    Message m;
    m.op = &a;
    m.buf = send ? const_cast<char*>(static_cast<const char*>(a.sendbuff)) : static_cast<char*>(a.recvbuff);
    m.bytes = bytesOf(a);
    (send ? sendQ : recvQ).add(a.root, m);
  }
  NCCLCHECK(checkSelf(comm, scratch.selfSends, scratch.selfRecvs));
  // The copies to self wait for the first pass over the peers' queues
  // (below), which posts the sends and describes pulled receives, so that
  // the peers move data meanwhile (a gather's or scatter's root).
  bool selfLeft = !scratch.selfSends.empty();
  if (selfLeft && ((sendQ.used == 0 && recvQ.used == 0) || selfOverlaps(scratch))) {
    copyToSelf(scratch.selfSends, scratch.selfRecvs);
    selfLeft = false;
  }
  if (sendQ.used == 0 && recvQ.used == 0) return ncclSuccess;

  markOverlaps(sendQ, recvQ);
  sendQ.sortByPeer();
  recvQ.sortByPeer();
  NCCLCHECK(connect(comm, sendQ, recvQ));

  // However the call ends, no sender writes into its receive buffers after it.
  struct Settle {
    ncclComm* comm;
    Queues& sendQ;
    Queues& recvQ;
    ~Settle() { settlePulls(comm, sendQ, recvQ); }
  } settle{comm, sendQ, recvQ};
  Steps steps(comm, ops[0].opName, /*driveSends=*/false);  // it probes; see Driver for who moves the frames
  Driver driver;
  Backoff backoff;
  size_t open = sendQ.used + recvQ.used;
  while (open > 0) {
    NCCLCHECK(steps.checkAbort());
    bool moved = false;
    open = 0;
    for (Queue& q : sendQ) {
      while (q.open()) {
        Message& m = q.msgs[q.head];
        if (m.done == 0 && !m.pulled && pullable(comm, q, m)) {
          if (!steps.sendReady(q.conn)) break;
          postPull(comm, steps, q, m);
          moved = true;
        }
        if (m.pulled) {  // done once the receiver releases the frame; until then, help it
          if ((m.seenHead = q.conn->fifo.ctrl->head.load(std::memory_order_acquire)) <= m.frame) {
            NCCLCHECK(writeChunk(comm, steps, q.conn, m, &moved));
            break;
          }
          m.done = m.bytes;
          ++q.head;
          moved = true;
          continue;
        }
        while (m.done < m.bytes && steps.sendReady(q.conn)) {
          size_t n = std::min(q.conn->fifo.slotBytes, m.bytes - m.done);
          if (m.copy || !steps.postFrom(q.conn, m.buf + m.done, n)) {  // a socket sends from the buffer itself
            memcpy(q.conn->fifo.slot(q.conn->step), m.buf + m.done, n);
            steps.post(q.conn, n);
          }
          m.done += n;
          moved = true;
        }
        if (m.done < m.bytes) break;
        ++q.head;
      }
      open += q.open();
    }
    for (Queue& q : recvQ) {
      while (q.open()) {
        Message& m = q.msgs[q.head];
        if (m.pulled) {
          bool finished = false;
          NCCLCHECK(pullChunk(comm, steps, q.conn, m, &moved, &finished));
          if (!finished) break;
          ++q.head;
          continue;
        }
        while (m.done < m.bytes && steps.recvReady(q.conn)) {
          if (q.conn->fifo.ctrl->bytes[q.conn->step % kSlots] & kPullFrame) {
            NCCLCHECK(startPull(steps, q.conn, m));
            break;
          }
          size_t n = std::min(q.conn->fifo.slotBytes, m.bytes - m.done);
          if (!m.mayWrite(m.done, n)) break;  // in place: a send has yet to take these bytes
          const char* data;
          NCCLCHECK(steps.recvSlot(q.conn, n, &data));
          memcpy(m.buf + m.done, data, n);
          steps.release(q.conn);
          m.done += n;
          moved = true;
        }
        if (m.pulled) continue;
        if (m.done < m.bytes) break;
        ++q.head;
      }
      open += q.open();
    }
    if (selfLeft) {
      copyToSelf(scratch.selfSends, scratch.selfRecvs);
      selfLeft = false;
      moved = true;
    }
    if (moved) {
      backoff.reset();
      steps.progressed();
      continue;
    }
    // Nothing moved: move the sockets' frames in this thread (as a wait
    // does), with their proxies standing aside, rather than leave each one
    // to a proxy's wake-up.
    driver.spin(sendQ, recvQ);
    if (open > 0 && backoff.checkNow()) {
      for (Queue& q : sendQ)
        if (q.open()) NCCLCHECK(steps.check(q.conn));
      for (Queue& q : recvQ)
        if (q.open()) NCCLCHECK(q.msgs[q.head].pulled ? steps.checkPulled(q.conn) : steps.check(q.conn));
    }
    if (open > 0 && !backoff.napping()) {
      backoff.pause();
    } else if (open > 0) {
      driver.handOver(true);
      sleepOnQueues(sendQ, recvQ);
    }
  }
  driver.handOver(false);
  return steps.waitAllSent();  // the send buffers go back to the caller
}

}  // namespace accl
