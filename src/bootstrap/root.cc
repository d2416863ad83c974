#include "bootstrap/root.h"

#include <unistd.h>

#include <cstdio>
#include <thread>
#include <vector>

#include "base/check.h"
#include "base/threads.h"
#include "base/wait.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/hello_gate.h"

namespace accl {
namespace {

// A count past kMaxRanks (wire.h) in a hello is a corrupt or hostile one,
// which must not size the root's table.
struct Member {
  int fd = -1;
  Hello hello;
};

// The reply to the rank whose hello is `to`, the table (none for a refusal),
// and the proof that this root holds the secret.
ncclResult_t reply(int fd, const Hello& to, const std::vector<uint8_t>& secret, ncclResult_t status, const char* msg,
                   const std::vector<SockAddr>& table = {}) {
  RootReply r = {};
  r.status = status;
  snprintf(r.message, sizeof(r.message), "%s", msg);
  uint8_t proof[kMacBytes];
  rootProof(secret.data(), to.nonce, r, table.data(), table.size(), proof);
  Deadline dl(nullptr, table.empty() ? 5 : 30);
  NCCLCHECK(socketSend(fd, &r, sizeof(r), dl));
  if (!table.empty()) NCCLCHECK(socketSend(fd, table.data(), table.size() * sizeof(SockAddr), dl));
  return socketSend(fd, proof, sizeof(proof), dl);
}

void rootLoop(int listenFd, const std::vector<uint8_t>& secret, const std::atomic<uint32_t>* stop) {
  FdGuard listener(listenFd);
  Deadline dl(stop);  // ACCL_TIMEOUT bounds how long the root waits for all ranks
  std::vector<Member> members;
  int nranks = -1, arrived = 0;
  HelloGate gate(listenFd, secret.data(), "bootstrap root");  // a silent stranger must not stall the root
  while (nranks < 0 || arrived < nranks) {
    Member m;
    if (gate.next(dl, &m.fd, &m.hello) != ncclSuccess) {
      if (dl.aborted()) INFO(kBootstrap, "bootstrap root: stopped, rank 0's init has ended (%d rank(s) came)", arrived);
      else if (nranks < 0) WARN("bootstrap root: no rank arrived before the deadline; giving up");
      else WARN("bootstrap root: %d of %d ranks arrived before the deadline; giving up", arrived, nranks);
      break;
    }
    if (m.hello.purpose != Purpose::Root) {
      INFO(kBootstrap, "bootstrap root: dropped a connection that came for another purpose");
      close(m.fd);
      continue;
    }
    const Hello& h = m.hello;
    if (h.nranks == 0) {  // ncclCommInitRankScalable: this id's root is not needed
      INFO(kBootstrap, "bootstrap root: released (another unique id of the same communicator is used)");
      close(m.fd);
      break;
    }
    char msg[200];
    if (h.nranks < 0 || h.nranks > kMaxRanks) {
      snprintf(msg, sizeof(msg), "rank %d says nranks=%d, outside [1, %d]", h.rank, h.nranks, kMaxRanks);
      WARN("bootstrap root: %s", msg);
      (void)reply(m.fd, m.hello, secret, ncclInvalidArgument, msg);
      close(m.fd);
      continue;
    }
    if (nranks < 0) {
      nranks = h.nranks;
      members.assign(nranks, Member());
    }
    if (h.nranks != nranks || h.rank < 0 || h.rank >= nranks || members[h.rank].fd >= 0) {
      snprintf(msg, sizeof(msg),
               h.nranks != nranks              ? "rank %d says nranks=%d but rank(s) before it said %d"
               : h.rank < 0 || h.rank >= nranks ? "rank %d is outside [0, nranks=%d) (first said %d)"
                                                : "rank %d joined twice (nranks=%d, first said %d)",
               h.rank, h.nranks, nranks);
      WARN("bootstrap root: %s", msg);
      (void)reply(m.fd, m.hello, secret, ncclInvalidUsage, msg);
      close(m.fd);
      continue;
    }
    members[h.rank] = m;
    ++arrived;
  }
  if (nranks > 0 && arrived == nranks) {
    std::vector<SockAddr> table(nranks);
    for (int r = 0; r < nranks; ++r) table[r] = members[r].hello.addr;
    for (int r = 0; r < nranks; ++r)
      if (reply(members[r].fd, members[r].hello, secret, ncclSuccess, "", table) != ncclSuccess)
        WARN("bootstrap root: could not send the address table to rank %d", r);
  } else {
    for (auto& m : members)
      if (m.fd >= 0)
        (void)reply(m.fd, m.hello, secret, dl.aborted() ? ncclInvalidUsage : ncclTimeout,
                    dl.aborted() ? "rank 0's init ended before every rank reached the bootstrap root"
                                 : "not every rank reached the bootstrap root before ACCL_TIMEOUT");
  }
  for (auto& m : members)
    if (m.fd >= 0) close(m.fd);
}

}  // namespace

ncclResult_t startRootThread(int listenFd, const uint8_t* secret, std::shared_ptr<RootStop> stop) {
  std::thread t;
  const ncclResult_t r = startThread(&t, [listenFd, key = std::vector<uint8_t>(secret, secret + kSecretBytes), stop] {
    rootLoop(listenFd, key, stop ? &stop->stop : nullptr);
    if (stop) stop->exited.store(true);
  }, "the bootstrap root thread");
  if (r != ncclSuccess) {
    close(listenFd);
    return r;
  }
  t.detach();
  return ncclSuccess;
}

}  // namespace accl
