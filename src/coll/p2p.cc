// Point-to-point: the sends and receives of a group run together, so pairs may
// be issued in any order (ring shifts, all-to-all) without deadlock. Each peer
// and direction is a queue of messages in call order; one progress loop moves
// whatever can move on every queue, chunk by chunk, and waits (bounded) only
// when nothing could move. Messages to self are copied directly.
#include <algorithm>
#include <cstring>
#include <vector>

#include "coll/coll.h"
#include "coll/steps.h"
#include "core/check.h"
#include "core/comm.h"
#include "transport/fifo_sleep.h"

namespace accl {
namespace {

struct Message {
  const CollArgs* op = nullptr;
  char* buf = nullptr;
  size_t bytes = 0;
  size_t done = 0;
  bool copy = false;  // a send whose buffer a receive of the call writes: into the slots, never sent from buf
  // A receive's: the sends of the call whose buffers it overlaps (in place);
  // it writes a part only once they have taken what was there.
  std::vector<const Message*> after;
  // Whether this receive may write its next n bytes now.
  bool mayWrite(size_t n) const {
    for (const Message* s : after)
      if (rangesOverlap(s->buf + s->done, s->bytes - s->done, buf + done, n)) return false;  // still to be taken
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

ncclResult_t copyToSelf(ncclComm* comm, const std::vector<const CollArgs*>& sends,
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
    if (sends[i]->sendbuff != recvs[i]->recvbuff) memmove(recvs[i]->recvbuff, sends[i]->sendbuff, bytesOf(*sends[i]));
  }
  return ncclSuccess;
}

// A rank bound to one core moves its open connections' frames itself while
// the call spins, and their proxies, which could only take turns with it on
// that core, stand aside (Connection::driving); it hands them back when it
// sleeps and when it ends. An unbound rank leaves the frames to the proxies,
// which run elsewhere (or, with more ranks than cores, would lose the core
// to ranks spinning on their sockets).
class Driver {
 public:
  explicit Driver(bool on) : on_(on) {}
  ~Driver() { handOver(false); }
  // Every connection it drives keeps moving, also once its queue is done
  // (a send's last frames may still be in its FIFO).
  void spin(Queues& sendQ, Queues& recvQ) {
    if (!on_) return;
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
  bool on_;
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

// Nothing moved for a while: asleep until a peer frees a slot of a blocked send
// or posts to a waiting receive (transport/fifo_sleep.h), at most 10 ms, so
// that the deadline and liveness checks go on.
void sleepOnQueues(Queues& sendQ, Queues& recvQ) {
  FifoSleepSet s;
  for (Queue& q : sendQ)  // nothing moved: the FIFO is full, head is here
    if (q.open()) s.head(q.conn->fifo.ctrl, q.conn->step - kSlots);
  for (Queue& q : recvQ)  // slots drained: a tail past it is data (data already there waits for a send)
    if (q.open() && q.conn->fifo.ctrl->tail.load(std::memory_order_acquire) == q.conn->step)
      s.tail(q.conn->fifo.ctrl, q.conn->step);
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
  NCCLCHECK(copyToSelf(comm, scratch.selfSends, scratch.selfRecvs));
  if (sendQ.used == 0 && recvQ.used == 0) return ncclSuccess;

  markOverlaps(sendQ, recvQ);
  sendQ.sortByPeer();
  recvQ.sortByPeer();
  NCCLCHECK(connect(comm, sendQ, recvQ));

  Steps steps(comm, ops[0].opName, /*driveSends=*/false);  // it probes; see Driver for who moves the frames
  Driver driver(steps.ownCore());
  Backoff backoff;
  size_t open = sendQ.used + recvQ.used;
  while (open > 0) {
    NCCLCHECK(steps.checkAbort());
    bool moved = false;
    open = 0;
    for (Queue& q : sendQ) {
      while (q.open()) {
        Message& m = q.msgs[q.head];
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
        while (m.done < m.bytes && steps.recvReady(q.conn)) {
          size_t n = std::min(q.conn->fifo.slotBytes, m.bytes - m.done);
          if (!m.mayWrite(n)) break;  // in place: a send has yet to take these bytes
          const char* data;
          NCCLCHECK(steps.recvSlot(q.conn, n, &data));
          memcpy(m.buf + m.done, data, n);
          steps.release(q.conn);
          m.done += n;
          moved = true;
        }
        if (m.done < m.bytes) break;
        ++q.head;
      }
      open += q.open();
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
        if (q.open()) NCCLCHECK(steps.check(q.conn));
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
