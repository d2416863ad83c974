#include "coll/steps.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>

#include "base/check.h"
#include "base/param.h"
#include "base/wait.h"
#include "core/comm.h"
#include "core/self_wait.h"
#include "transport/connection.h"
#include "transport/fifo_sleep.h"
#include "transport/peer_life.h"

namespace accl {
namespace {

// A wait that has spun long enough sleeps until the peer moves the counter,
// waking this often for the deadline and liveness checks (and an abort).
constexpr int kSleepCheckMs = 10;

// Whether this thread may run on one CPU only (a rank bound to a core): then
// its connections' proxies can only take turns with it, and it keeps them
// aside for the whole operation. Asked every 256 operations of the thread
// (a system call), so a thread bound later is seen.
bool onOneCore() {
  thread_local bool one = false;
  thread_local uint32_t ops = 0;
  if (ops++ % 256 == 0) {
    cpu_set_t set;
    one = sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1;
  }
  return one;
}

}  // namespace

Steps::Steps(ncclComm* comm, const char* opName, bool driveSends)
    : comm_(comm), op_(opName), ownCore_(onOneCore()), wholeOp_(driveSends && ownCore_) {}

Steps::~Steps() {
  // Frames from the operation's memory that never left: the memory goes back
  // to the caller now (the operation failed; on success it waited for them).
  for (int i = 0; i < nSentFrom_; ++i)
    if (sentFrom_[i]->fifo.ctrl->head.load(std::memory_order_acquire) < sentFrom_[i]->step)
      sentFrom_[i]->abandonFrom();
  handOver(false);
}

bool Steps::drive(Connection* c) {
  for (int i = 0; i < nDriven_; ++i)
    if (driven_[i] == c) return true;
  if (nDriven_ == kMaxDriven) return false;  // its proxy moves it while this op computes
  driven_[nDriven_++] = c;
  if (awake_) c->driving(true, false);
  return true;
}

void Steps::awake() {
  if (awake_) return;
  awake_ = true;
  for (int i = 0; i < nDriven_; ++i) driven_[i]->driving(true, false);
}

void Steps::handOver(bool sleeping) {
  if (!awake_) return;
  awake_ = false;
  for (int i = 0; i < nDriven_; ++i) driven_[i]->driving(false, sleeping);
}

void Steps::progressAll() {
  for (int i = 0; i < nDriven_; ++i) driven_[i]->progress();
}

void Steps::spin(Connection* c, bool listed, bool* on) {
  if (wholeOp_) {
    awake();
    progressAll();
    if (!listed) c->progress();
    return;
  }
  if (!*on) c->driving(true, false);
  *on = true;
  c->progress();
}

void Steps::rest(Connection* c, bool* on, bool sleeping) {
  if (wholeOp_) {
    if (sleeping) handOver(true);
    return;
  }
  if (*on) c->driving(false, sleeping);
  *on = false;
}

ncclResult_t Steps::fail(Connection* c, ncclResult_t err, const char* why) {
  const PeerInfo& p = comm_->peers[c->peer];
  WARN("%s (%s, rank %d of %d, op #%llu): %s rank %d (pid %d on %s, via %s) %s", op_, comm_->name.c_str(),
       comm_->rank, comm_->nranks, static_cast<unsigned long long>(comm_->opCount),
       c->isSend ? "sending to" : "receiving from", c->peer, p.pid, p.hostname, c->kind, why);
  commSetError(comm_, err);
  return err;
}

ncclResult_t Steps::failGone(Connection* c, const char* gone) {
  commNoteFailedRank(comm_, c->peer);
  char why[160];
  snprintf(why, sizeof(why), "failed: %s", gone);
  return fail(c, ncclRemoteError, why);
}

ncclResult_t Steps::checkAbort() const {
  return comm_->abortFlag.load(std::memory_order_relaxed) ? commAbortedResult(comm_, op_) : ncclSuccess;
}

ncclResult_t Steps::check(Connection* c) {
  if (comm_->abortFlag.load(std::memory_order_relaxed)) return commAbortedResult(comm_, op_);
  FifoCtrl* ctrl = c->fifo.ctrl;
  if (ctrl->abort.load(std::memory_order_relaxed)) {
    int root = ctrl->failedRank.load();
    char why[128];
    if (root >= 0 && root != c->peer)
      snprintf(why, sizeof(why), "failed: the peer stopped because rank %d failed", root);
    else if (root == c->peer)
      snprintf(why, sizeof(why), "failed: the peer aborted");
    else
      snprintf(why, sizeof(why), "failed: the peer reported an error");
    commNoteFailedRank(comm_, root >= 0 ? root : c->peer);
    return fail(c, ncclRemoteError, why);
  }
  // A peer that is gone (closed, exited, destroyed its communicator) matters
  // only while this side still waits on it: it may send (or take) the last
  // frame and leave between any look at the FIFO and the finding that it is
  // gone, so the FIFO is looked at again after that finding.
  auto settled = [&] { return c->isSend ? ctrl->head.load(std::memory_order_acquire) >= c->step : recvReady(c); };
  if (settled()) return ncclSuccess;
  return checkPeer(c, settled);
}

ncclResult_t Steps::checkPulled(Connection* c) {
  if (comm_->abortFlag.load(std::memory_order_relaxed)) return commAbortedResult(comm_, op_);
  if (c->fifo.ctrl->abort.load(std::memory_order_relaxed)) return check(c);  // names the cause
  return checkPeer(c, [] { return false; });
}

template <typename Settled>
ncclResult_t Steps::checkPeer(Connection* c, Settled settled) {
  FifoCtrl* ctrl = c->fifo.ctrl;
  if (ctrl->peerGone.load(std::memory_order_acquire)) {
    if (settled()) return ncclSuccess;
    commNoteFailedRank(comm_, c->peer);
    return fail(c, ncclRemoteError, "failed: connection closed (peer process died or destroyed its communicator)");
  }
  uint64_t now = nowMs();
  if (!deadline_) {  // the first check of a stall: a wait that never waited long reads no clock
    deadline_.emplace(&comm_->abortFlag);
    lastPeerCheck_ = now;
  }
  if (now - lastPeerCheck_ >= static_cast<uint64_t>(paramInt(Param::PeerCheckMs))) {
    lastPeerCheck_ = now;
    if (const char* gone = peerGone(comm_, c->peer)) {  // by pid, or by its lock in another PID namespace
      if (settled()) return ncclSuccess;
      return failGone(c, gone);
    }
  }
  if (const char* why = selfWaitStuck(comm_, c->peer)) return fail(c, ncclInvalidUsage, why);
  if (deadline_->expired()) return fail(c, ncclTimeout, "timed out (ACCL_TIMEOUT)");
  return ncclSuccess;
}

ncclResult_t Steps::recvSlot(Connection* c, size_t bytes, const char** data) {
  uint32_t got = c->fifo.ctrl->bytes[c->step % kSlots];
  if (got != bytes) {
    char why[160];
    snprintf(why, sizeof(why),
             "sent %u bytes where %zu were expected (do all ranks call the same operations with the same counts?)",
             got, bytes);
    return fail(c, ncclInvalidUsage, why);
  }
  *data = c->fifo.slot(c->step);
  return ncclSuccess;
}

ncclResult_t Steps::waitRecv(Connection* c, size_t bytes, const char** data) {
  NCCLCHECK(checkAbort());
  Backoff b;
  Wait w(this, c);
  while (!recvReady(c)) {
    if (b.checkNow()) NCCLCHECK(check(c));
    w.spin();
    if (recvReady(c)) break;
    if (!b.napping()) {
      b.pause();
      continue;
    }
    w.sleep();
    FifoSleepSet s;
    s.tail(c->fifo.ctrl, c->step);  // slots drained: a tail past it is data
    s.sleep(kSleepCheckMs);
  }
  progressed();
  return recvSlot(c, bytes, data);
}

ncclResult_t Steps::waitSend(Connection* c, char** slot) {
  // Not free: the FIFO is full, and the slot frees once head passes step - kSlots.
  if (!sendReady(c)) NCCLCHECK(waitSent(c, c->step - kSlots + 1));
  *slot = c->fifo.slot(c->step);
  return ncclSuccess;
}

ncclResult_t Steps::waitSent(Connection* c, uint64_t upTo) {
  NCCLCHECK(checkAbort());
  Backoff b;
  Wait w(this, c);
  uint64_t head, seen = 0;
  while ((head = c->fifo.ctrl->head.load(std::memory_order_acquire)) < upTo) {
    if (head != seen) {  // a frame left: a long send (waitAllSent) is bounded per frame
      seen = head;
      progressed();
    }
    if (b.checkNow()) NCCLCHECK(check(c));
    w.spin();
    if (c->fifo.ctrl->head.load(std::memory_order_acquire) >= upTo) break;
    if (!b.napping()) {
      b.pause();
      continue;
    }
    w.sleep();
    FifoSleepSet s;
    s.head(c->fifo.ctrl, head);  // until the frame at head leaves
    s.sleep(kSleepCheckMs);
  }
  progressed();
  return ncclSuccess;
}

void Steps::post(Connection* c, size_t bytes) {
  c->from[c->step % kSlots] = nullptr;
  publish(c, bytes);
}

bool Steps::postFrom(Connection* c, const void* data, size_t bytes) {
  if (!c->sendsFromMemory()) return false;
  int i = 0;
  while (i < nSentFrom_ && sentFrom_[i] != c) ++i;
  if (i == kMaxDriven) return false;  // too many to account for: this one copies
  sentFrom_[i] = c;
  nSentFrom_ = std::max(nSentFrom_, i + 1);
  c->from[c->step % kSlots] = static_cast<const char*>(data);
  publish(c, bytes);
  return true;
}

ncclResult_t Steps::waitAllSent() {
  for (int i = 0; i < nSentFrom_; ++i) NCCLCHECK(waitSent(sentFrom_[i], sentFrom_[i]->step));
  return ncclSuccess;
}

void Steps::publish(Connection* c, size_t bytes) {
  c->fifo.ctrl->bytes[c->step % kSlots] = static_cast<uint32_t>(bytes);
  if (wholeOp_) {
    awake();
    drive(c);
  }
  c->posted(++c->step);
}

void Steps::release(Connection* c) { fifoPostHead(c->fifo.ctrl, ++c->step); }

}  // namespace accl
