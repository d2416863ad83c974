// Point-to-point: the sends and receives of a group run together, so pairs may
// be issued in any order (ring shifts, all-to-all) without deadlock. Each peer
// and direction is a queue of messages in call order; one progress loop moves
// whatever can move on every queue, chunk by chunk, and waits (bounded) only
// when nothing could move. Messages to self are copied directly.
#include <algorithm>
#include <cstring>
#include <deque>
#include <map>

#include "coll/coll.h"
#include "coll/steps.h"
#include "core/check.h"
#include "core/comm.h"
#include "transport/fifo_sleep.h"

namespace accl {
namespace {

struct Message {
  const CollArgs* op;
  char* buf;
  size_t bytes;
  size_t done = 0;
};

struct Queue {
  Connection* conn = nullptr;
  std::deque<Message> msgs;
};

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

// Nothing moved for a while: asleep until a peer frees a slot of a blocked send
// or posts to a waiting receive (transport/fifo_sleep.h), at most 10 ms, so
// that the deadline and liveness checks go on.
template <typename Queues>
void sleepOnQueues(Queues& sendQ, Queues& recvQ) {
  FifoSleepSet s;
  for (auto& kv : sendQ)  // nothing moved: the FIFO is full, head is here
    if (!kv.second.msgs.empty()) s.head(kv.second.conn->fifo.ctrl, kv.second.conn->step - kSlots);
  for (auto& kv : recvQ)  // slots drained: a tail past it is data
    if (!kv.second.msgs.empty()) s.tail(kv.second.conn->fifo.ctrl, kv.second.conn->step);
  s.sleep(10);
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
  std::vector<const CollArgs*> selfSends, selfRecvs;
  std::map<int, Queue> sendQ, recvQ;
  for (const CollArgs& a : ops) {
    bool send = a.kind == CollKind::Send;
    if (a.root == comm->rank) {
      (send ? selfSends : selfRecvs).push_back(&a);
      continue;
    }
    Message m{&a, send ? const_cast<char*>(static_cast<const char*>(a.sendbuff)) : static_cast<char*>(a.recvbuff),
              bytesOf(a)};
    (send ? sendQ : recvQ)[a.root].msgs.push_back(m);
  }
  NCCLCHECK(copyToSelf(comm, selfSends, selfRecvs));
  if (sendQ.empty() && recvQ.empty()) return ncclSuccess;

  std::vector<int> sendTo, recvFrom;
  for (auto& kv : sendQ) sendTo.push_back(kv.first);
  for (auto& kv : recvQ) recvFrom.push_back(kv.first);
  std::vector<Connection*> sends, recvs;
  NCCLCHECK(getConnections(comm, sendTo, recvFrom, kTagP2p, &sends, &recvs));
  for (size_t i = 0; i < sendTo.size(); ++i) sendQ[sendTo[i]].conn = sends[i];
  for (size_t i = 0; i < recvFrom.size(); ++i) recvQ[recvFrom[i]].conn = recvs[i];

  Steps steps(comm, ops[0].opName, /*driveSends=*/false);  // it probes; the proxies move the frames
  Backoff backoff;
  size_t open = sendQ.size() + recvQ.size();
  while (open > 0) {
    bool moved = false;
    open = 0;
    for (auto& kv : sendQ) {
      Queue& q = kv.second;
      while (!q.msgs.empty()) {
        Message& m = q.msgs.front();
        while (m.done < m.bytes && steps.sendReady(q.conn)) {
          size_t n = std::min(q.conn->fifo.slotBytes, m.bytes - m.done);
          memcpy(q.conn->fifo.slot(q.conn->step), m.buf + m.done, n);
          steps.post(q.conn, n);
          m.done += n;
          moved = true;
        }
        if (m.done < m.bytes) break;
        q.msgs.pop_front();
      }
      open += !q.msgs.empty();
    }
    for (auto& kv : recvQ) {
      Queue& q = kv.second;
      while (!q.msgs.empty()) {
        Message& m = q.msgs.front();
        while (m.done < m.bytes && steps.recvReady(q.conn)) {
          size_t n = std::min(q.conn->fifo.slotBytes, m.bytes - m.done);
          const char* data;
          NCCLCHECK(steps.recvSlot(q.conn, n, &data));
          memcpy(m.buf + m.done, data, n);
          steps.release(q.conn);
          m.done += n;
          moved = true;
        }
        if (m.done < m.bytes) break;
        q.msgs.pop_front();
      }
      open += !q.msgs.empty();
    }
    if (moved) {
      backoff.reset();
      continue;
    }
    if (open > 0 && backoff.checkNow()) {
      for (auto& kv : sendQ)
        if (!kv.second.msgs.empty()) NCCLCHECK(steps.check(kv.second.conn));
      for (auto& kv : recvQ)
        if (!kv.second.msgs.empty()) NCCLCHECK(steps.check(kv.second.conn));
    }
    if (open > 0 && !backoff.napping()) backoff.pause();
    else if (open > 0) sleepOnQueues(sendQ, recvQ);
  }
  return ncclSuccess;
}

}  // namespace accl
