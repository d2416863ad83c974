#include "bootstrap/bootstrap.h"

#include <unistd.h>

#include <cstring>
#include <string>

#include "base/check.h"
#include "base/param.h"
#include "base/sha256.h"
#include "base/wait.h"
#include "bootstrap/root.h"

namespace accl {
namespace {

// A deterministic 32-byte secret from a string (NCCL_COMM_ID mode, where every
// rank computes the id independently): HMAC-SHA256 keyed by our label.
void deriveSecret(const std::string& text, uint8_t* out) {
  static const char kLabel[] = "ACCL bootstrap secret from NCCL_COMM_ID and ACCL_SECRET";
  hmacSha256(reinterpret_cast<const uint8_t*>(kLabel), sizeof(kLabel) - 1, text.data(), text.size(), out);
}

// The hello's fields, all other bytes zero; sealHello (after any other field
// is set) adds the nonce and the MAC.
Hello makeHello(Purpose p, int rank, int nranks, int tag, int32_t to) {
  Hello h;
  memset(&h, 0, sizeof(h));
  h.magic = kHelloMagic;
  h.purpose = p;
  h.to = to;
  h.rank = rank;
  h.nranks = nranks;
  h.tag = tag;
  return h;
}

bool commIdMode(SockAddr* root) {
  const char* commId = paramString(Param::CommId);
  if (!*commId) return false;
  return parseAddr(commId, root);
}

}  // namespace

ncclResult_t makeUniqueId(UniqueIdLayout* id, bool fromCommId) {
  memset(id, 0, sizeof(*id));
  id->magic = kIdMagic;
  id->version = 1;
  const char* commId = paramString(Param::CommId);
  if (fromCommId && *commId) {
    if (!commIdMode(&id->root)) {
      WARN("NCCL_COMM_ID=%s is not a valid ip:port (a port in [1, 65535])", commId);
      return ncclInvalidArgument;
    }
    id->fromCommId = 1;
    const char* secret = paramString(Param::Secret);
    static std::once_flag warned;  // once per process: every init in this mode reads the same variables
    if (!*secret)
      std::call_once(warned, [commId] {
        WARN("NCCL_COMM_ID=%s without ACCL_SECRET: the bootstrap's secret derives from the address alone, so "
             "any process that knows it can join; set the same ACCL_SECRET on every rank", commId);
      });
    deriveSecret(std::string(commId) + "|" + secret, id->secret);
    return ncclSuccess;
  }
  NCCLCHECK(randomBytes(id->secret, kSecretBytes));
  std::vector<NetIf> ifs;
  NCCLCHECK(chooseInterfaces(nullptr, &ifs));
  int fd;
  NCCLCHECK(socketListen(ifs[0].addr, &fd, &id->root));
  INFO(kBootstrap, "bootstrap root listening on %s (%s)", addrToString(id->root).c_str(), ifs[0].name.c_str());
  return startRootThread(fd, id->secret);
}

bool uniqueIdValid(const UniqueIdLayout& id) {
  return id.magic == kIdMagic && id.version == 1 && id.fromCommId <= 1 &&
         (id.root.sa.sa_family == AF_INET || id.root.sa.sa_family == AF_INET6);
}

void releaseRoot(const UniqueIdLayout& id) {
  int fd;
  Deadline dl(nullptr, 5);
  bool refused = false;  // a root that is gone already: nothing to release, no retries
  if (socketConnect(id.root, dl, &fd, &refused) != ncclSuccess) return;
  FdGuard g(fd);
  Hello h = makeHello(Purpose::Root, 0, 0, 0, kToRoot);
  (void)sendRootHello(fd, h, id.secret, dl);
}

Bootstrap::~Bootstrap() {
  for (int fd : {listenFd_, nextFd_.load(), prevFd_.load()})
    if (fd >= 0) close(fd);
  for (auto& kv : stash_) close(kv.second);
}

void Bootstrap::shutdownAll() {
  for (int fd : {nextFd_.load(), prevFd_.load()})
    if (fd >= 0) shutdown(fd, SHUT_RDWR);
}

ncclResult_t Bootstrap::init(const UniqueIdLayout& id, int rank, int nranks,
                             const std::atomic<uint32_t>* abortFlag) {
  rank_ = rank;
  nranks_ = nranks;
  abort_ = abortFlag;
  memcpy(secret_, id.secret, kSecretBytes);
  std::vector<NetIf> ifs;
  NCCLCHECK(chooseInterfaces(&id.root, &ifs));
  netif_ = ifs[0];
  NCCLCHECK(socketListen(netif_.addr, &listenFd_, &listenAddr_));
  gateName_ = "rank " + std::to_string(rank);
  gate_ = std::make_unique<HelloGate>(listenFd_, secret_, gateName_.c_str(), rank);
  if (rank == 0 && id.fromCommId) {
    // NCCL_COMM_ID: rank 0 hosts the root at the fixed address (an id made
    // otherwise, a split's, has its root running already).
    int rootFd;
    NCCLCHECK(socketListen(id.root, &rootFd, nullptr));
    rootStop_ = std::make_shared<RootStop>();
    NCCLCHECK(startRootThread(rootFd, secret_, rootStop_));
  }
  const ncclResult_t met = rendezvous(id);
  if (rootStop_) {
    // Rank 0 had its reply, which comes once all ranks arrived (the root then
    // sends the table to the others, which the stop leaves alone), or gave up:
    // either way the root need not wait any more. After a failure the port is
    // free when init returns, so that a retry can listen on it again.
    rootStop_->stop.store(1);
    for (int ms = 0; met != ncclSuccess && !rootStop_->exited.load() && ms < 5000; ++ms) usleep(1000);
  }
  NCCLCHECK(met);
  if (nranks == 1) return ncclSuccess;
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  int nextFd = -1, prevFd = -1;
  ncclResult_t r = connectPeer(next, Purpose::Ring, 0, &nextFd);
  nextFd_.store(nextFd);
  NCCLCHECK(r);
  r = acceptPeer(prev, Purpose::Ring, 0, &prevFd);
  prevFd_.store(prevFd);
  NCCLCHECK(r);
  // An abort that came while the ring was being made shut down what it found:
  // the ring's sockets are shut down here too, so that no wait on them starts.
  if (abort_ && abort_->load()) shutdownAll();
  INFO(kBootstrap, "rank %d/%d bootstrap on %s (%s), ring %d -> %d -> %d", rank, nranks,
       addrToString(listenAddr_).c_str(), netif_.name.c_str(), prev, rank, next);
  return ncclSuccess;
}

ncclResult_t Bootstrap::rendezvous(const UniqueIdLayout& id) {
  int fd;
  ncclResult_t r = socketConnect(id.root, deadline(), &fd);
  if (r != ncclSuccess) {
    WARN("rank %d: cannot reach the bootstrap root at %s (is the unique id from a live process?)", rank_,
         addrToString(id.root).c_str());
    return r;
  }
  FdGuard g(fd);
  Hello h = makeHello(Purpose::Root, rank_, nranks_, 0, kToRoot);
  h.addr = listenAddr_;
  r = sendRootHello(fd, h, secret_, deadline());
  if (r != ncclSuccess) {
    WARN("rank %d: the bootstrap root at %s did not take this rank's hello", rank_, addrToString(id.root).c_str());
    return r;
  }
  RootReply reply;
  r = socketRecv(fd, &reply, sizeof(reply), deadline());
  if (r != ncclSuccess) {
    if (deadline().aborted())
      WARN("rank %d: aborted while it waited at the bootstrap root (%s) for all %d ranks", rank_,
           addrToString(id.root).c_str(), nranks_);
    else
      WARN("rank %d: the bootstrap root at %s closed the connection before all %d ranks arrived", rank_,
           addrToString(id.root).c_str(), nranks_);
    return r;
  }
  // The table (on success), then the root's proof that it holds the secret:
  // nothing it said counts before the proof verifies.
  std::vector<SockAddr> table(reply.status == ncclSuccess ? nranks_ : 0);
  uint8_t proof[kMacBytes], expected[kMacBytes];
  r = socketRecv(fd, table.data(), table.size() * sizeof(SockAddr), deadline());
  if (r == ncclSuccess) r = socketRecv(fd, proof, sizeof(proof), deadline());
  rootProof(secret_, h.nonce, reply, table.data(), table.size(), expected);
  if (r != ncclSuccess || !secretEqual(proof, expected)) {
    WARN("rank %d: the bootstrap root at %s did not prove that it holds the unique id's secret (another "
         "process on that address, or an older ACCL)", rank_, addrToString(id.root).c_str());
    return ncclRemoteError;
  }
  if (reply.status != ncclSuccess) {
    reply.message[sizeof(reply.message) - 1] = '\0';
    WARN("rank %d: bootstrap root refused: %s", rank_, reply.message);
    const int32_t code = reply.status;  // only an error code passes as one
    return code == ncclInvalidArgument || code == ncclInvalidUsage || code == ncclTimeout
               ? static_cast<ncclResult_t>(code) : ncclRemoteError;
  }
  peers_ = std::move(table);
  bootstrapSession(peers_.data(), peers_.size(), session_);
  gate_->setSession(session_);
  return ncclSuccess;
}

ncclResult_t Bootstrap::connectPeer(int peer, Purpose purpose, int tag, int* fd, const Deadline* given) {
  const Deadline dl = given ? *given : deadline();
  int s;
  // A peer's listener lives as long as its communicator, and this rank learnt
  // its address after it listened: a refusal means it is gone (a process
  // that exited, or a communicator destroyed), not yet to come.
  bool refused = false;
  const ncclResult_t r = socketConnect(peers_[peer], dl, &s, &refused);
  if (refused)
    WARN("rank %d: rank %d refused a connection at %s: its process has exited or destroyed its communicator (or "
         "that address is not its: NCCL_SOCKET_IFNAME)", rank_, peer, addrToString(peers_[peer]).c_str());
  NCCLCHECK(r);
  FdGuard g(s);
  Hello h = makeHello(purpose, rank_, nranks_, tag, peer);
  memcpy(h.session, session_, kSessionBytes);
  NCCLCHECK(sealHello(h, secret_));
  NCCLCHECK(socketSend(s, &h, sizeof(h), dl));
  *fd = g.release();
  return ncclSuccess;
}

ncclResult_t Bootstrap::acceptPeer(int peer, Purpose purpose, int tag, int* fd, const Deadline* given) {
  std::lock_guard<std::mutex> lock(acceptMu_);
  auto key = std::make_tuple(peer, static_cast<int>(purpose), tag);
  const Deadline dl = given ? *given : deadline();
  for (;;) {
    auto it = stash_.find(key);
    if (it != stash_.end()) {
      *fd = it->second;
      stash_.erase(it);
      return ncclSuccess;
    }
    int s;
    Hello h;
    ncclResult_t r = gate_->next(dl, &s, &h);
    if (r != ncclSuccess) {
      WARN("rank %d: waiting for a connection from rank %d failed", rank_, peer);
      return r;
    }
    if (h.nranks != nranks_ || h.rank < 0 || h.rank >= nranks_) {
      INFO(kBootstrap, "rank %d: dropped a connection of rank %d of %d (this communicator has %d ranks)", rank_,
           h.rank, h.nranks, nranks_);
      close(s);
      continue;
    }
    auto got = std::make_tuple(h.rank, static_cast<int>(h.purpose), h.tag);
    if (got == key) {
      *fd = s;
      return ncclSuccess;
    }
    auto old = stash_.find(got);
    if (old != stash_.end()) close(old->second);
    stash_[got] = s;
  }
}

ncclResult_t Bootstrap::allgather(void* all, size_t bytes) {
  char* base = static_cast<char*>(all);
  // Step s: pass slot (rank - s) on to the next rank, take slot (rank - s - 1) from the previous.
  for (int s = 0; s < nranks_ - 1; ++s) {
    int sendSlot = (rank_ - s + nranks_) % nranks_;
    int recvSlot = (rank_ - s - 1 + nranks_) % nranks_;
    ncclResult_t r = socketSendRecv(nextFd_, base + sendSlot * bytes, bytes, prevFd_, base + recvSlot * bytes,
                                    bytes, deadline());
    if (r != ncclSuccess) {
      const int prev = (rank_ + nranks_ - 1) % nranks_, next = (rank_ + 1) % nranks_;
      if (r == ncclRemoteError && prev == next)
        WARN("rank %d: bootstrap ring broken (rank %d closed its connection: process died or aborted)", rank_, prev);
      else if (r == ncclRemoteError)
        WARN("rank %d: bootstrap ring broken (rank %d or %d closed its connection: process died or aborted)",
             rank_, prev, next);
      return r;
    }
  }
  return ncclSuccess;
}

ncclResult_t Bootstrap::barrier() {
  std::vector<char> buf(nranks_, 1);
  return allgather(buf.data(), 1);
}

}  // namespace accl
