// Pairwise connection set-up. For each connection the receiver chooses the
// transport (transport/transport.h: the first in kTransports that can
// connect the pair) and tells the sender over a set-up socket:
//   1. every sender connects to its receiver's listener (never blocks on the peer:
//      the listener's backlog queues it);
//   2. every receiver accepts each sender, makes its side of the transport
//      (a shared-memory FIFO, a device connector, or the socket itself) and
//      answers with the transport's code;
//   3. every sender reads the answer, makes its side and acknowledges (or
//      keeps the socket as the connection's control line);
//   3b. every rank finishes what needs both sides at once (a network
//      connection's connect and accept), all its connections together;
//   4. every receiver reads the acknowledgement and drops what only the set-up
//      needed (the shared-memory name), so nothing is left in /dev/shm even if
//      a process dies later.
// Each phase waits only for phases before it on other ranks, so no order of
// peers can deadlock.
#include <unistd.h>

#include "base/check.h"
#include "base/errors.h"
#include "base/param.h"
#include "base/wait.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/socket.h"
#include "core/comm.h"
#include "core/self_wait.h"
#include "transport/connection.h"
#include "transport/transport.h"

namespace accl {

size_t slotBytesParam(bool acrossHosts) {
  int64_t chunk = paramInt(Param::ChunkSize);
  int64_t buff = paramInt(Param::BuffSize);
  // Host buffers between hosts: NCCL's 4 MiB unless set (measured faster on
  // the GPU machine's loopback: docs/gpu-baseline.md, stop 43).
  if (acrossHosts && chunk <= 0 && !paramIsSet(Param::BuffSize)) buff = kBuffBytesAcrossHosts;
  int64_t slot = chunk > 0 ? chunk : buff / kSlots;
  if (slot < 4096) slot = 4096;
  if (slot > (1 << 30)) slot = 1 << 30;
  return static_cast<size_t>(slot) & ~size_t(4095);
}

namespace {

// Where a set-up is, for the message when it fails.
struct SetUpAt {
  ncclComm* comm;
  int tag;
  int peer = -1;
  const char* step = "starting";
  bool inVain = false;  // it waited for a rank of this process that no thread can bring (core/self_wait.h)
};

// The set-up's give-up check: the peer it waits for now can never come.
bool setUpInVain(void* ctx) {
  SetUpAt& at = *static_cast<SetUpAt*>(ctx);
  if (at.peer < 0 || at.inVain) return at.inVain;
  const char* why = selfWaitStuck(at.comm, at.peer);
  if (!why) return false;
  WARN("%s rank %d: setting up a connection (tag %d) with rank %d %s", at.comm->name.c_str(), at.comm->rank, at.tag,
       at.peer, why);
  at.inVain = true;
  return true;
}

ncclResult_t setUp(ncclComm* comm, const std::vector<int>& sendTo, const std::vector<int>& recvFrom, int tag,
                   std::vector<ConnPtr>* sends, std::vector<ConnPtr>* recvs, SetUpAt* at) {
  Bootstrap& bs = *comm->bootstrap;
  Deadline dl(&comm->abortFlag);
  dl.giveUpWhen(setUpInVain, at);
  sends->clear();
  recvs->clear();
  sends->resize(sendTo.size());
  recvs->resize(recvFrom.size());
  std::vector<FdGuard> sendFds(sendTo.size()), recvFds(recvFrom.size());
  std::vector<const Transport*> recvBy(recvFrom.size());

  for (size_t i = 0; i < sendTo.size(); ++i) {  // 1
    int fd;
    at->peer = sendTo[i];
    at->step = "connecting to it";
    NCCLCHECK(bs.connectPeer(sendTo[i], Purpose::Data, tag, &fd, &dl));
    sendFds[i].reset(fd);
  }
  for (size_t i = 0; i < recvFrom.size(); ++i) {  // 2
    int fd, peer = recvFrom[i];
    at->peer = peer;
    at->step = "accepting its connection and answering it";
    NCCLCHECK(bs.acceptPeer(peer, Purpose::Data, tag, &fd, &dl));
    recvFds[i].reset(fd);
    const Transport* t = nullptr;
    for (const Transport* c : kTransports)
      if (!t && c->canConnect(comm, peer, tag)) t = c;
    int keep = recvFds[i].release();  // a transport that carries its data on the socket takes it
    const ncclResult_t r = t->recvSide(comm, peer, tag, &keep, dl, &(*recvs)[i]);
    recvFds[i].reset(keep);
    NCCLCHECK(r);
    recvBy[i] = t;
  }
  for (size_t i = 0; i < sendTo.size(); ++i) {  // 3
    const int peer = sendTo[i];
    char code = 0;
    at->peer = peer;
    at->step = "reading its answer and opening the connection";
    NCCLCHECK(socketRecv(sendFds[i].get(), &code, 1, dl));
    const Transport* t = nullptr;
    for (const Transport* c : kTransports)
      if (c->code == code) t = c;
    if (!t) {
      WARN("rank %d: connection set-up with rank %d got an invalid answer (%d)", comm->rank, peer, code);
      return ncclInternalError;
    }
    int keep = sendFds[i].release();
    const ncclResult_t r = t->sendSide(comm, peer, tag, &keep, dl, &(*sends)[i]);
    sendFds[i].reset(keep);
    NCCLCHECK(r);
  }
  // 3b: what needs both sides at once (a network connection's connect and
  // accept), for every connection of this rank together.
  for (Backoff b;;) {
    bool all = true;
    for (size_t i = 0; i < sendTo.size() + recvFrom.size(); ++i) {
      const bool send = i < sendTo.size();
      Connection* c = (send ? (*sends)[i] : (*recvs)[i - sendTo.size()]).get();
      bool done = false;
      at->peer = send ? sendTo[i] : recvFrom[i - sendTo.size()];
      at->step = "finishing the connection (network connect or accept)";
      NCCLCHECK(c->settle(&done));
      all = all && done;
    }
    if (all) break;
    if (dl.aborted()) return ncclInvalidUsage;
    if (b.checkNow() && dl.expired()) {
      WARN("rank %d: connection set-up with rank %d timed out (ACCL_TIMEOUT)", comm->rank, at->peer);
      return ncclTimeout;
    }
    b.pause();
  }
  for (size_t i = 0; i < recvFrom.size(); ++i) {  // 4
    if (recvFds[i].get() < 0) continue;  // the socket is the connection's now (its control line): nothing to acknowledge
    char ack = 0;
    at->peer = recvFrom[i];
    at->step = "reading its acknowledgement";
    NCCLCHECK(socketRecv(recvFds[i].get(), &ack, 1, dl));
    if (recvBy[i]->setUpDone) recvBy[i]->setUpDone((*recvs)[i].get());
  }
  for (auto& s : *sends) INFO(kInit, "rank %d -> rank %d via %s (tag %d)", comm->rank, s->peer, s->kind, tag);
  return ncclSuccess;
}

}  // namespace

ncclResult_t connectPeers(ncclComm* comm, const std::vector<int>& sendTo, const std::vector<int>& recvFrom,
                          int tag, std::vector<ConnPtr>* sends, std::vector<ConnPtr>* recvs) {
  SetUpAt at{comm, tag};
  const ncclResult_t r = setUp(comm, sendTo, recvFrom, tag, sends, recvs, &at);
  if (r == ncclSuccess || comm->abortFlag.load(std::memory_order_relaxed)) return r;
  // Name the peer and the step (a socket that closed says nothing itself),
  // and fail the communicator: its calls cannot pair up without this connection.
  if (!at.inVain) WARN("%s rank %d: setting up a connection (tag %d) with rank %d failed while %s: %s (did rank %d fail, exit or "
       "call another operation?)", comm->name.c_str(), comm->rank, tag, at.peer, at.step, errorString(r),
       at.peer);
  if (r == ncclRemoteError && at.peer >= 0) commNoteFailedRank(comm, at.peer);  // the peer is gone: the others learn who
  commSetError(comm, r);
  sends->clear();
  recvs->clear();
  return r;
}

}  // namespace accl
