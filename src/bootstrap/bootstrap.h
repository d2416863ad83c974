// Per-communicator bootstrap network: each rank listens on one socket, learns
// every rank's listener through the root, and keeps a ring of connections
// (to the next rank, from the previous) for allgather and barrier. Other
// connections (transports) are made on demand with connectPeer/acceptPeer.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "base/wait.h"
#include "bootstrap/hello_gate.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/root.h"
#include "bootstrap/wire.h"

namespace accl {

// Fills a unique id: starts a root thread on a chosen interface, or encodes
// NCCL_COMM_ID (whose root rank 0 starts in Bootstrap::init). The ids that
// ACCL makes for itself (a split's, a shrink's) pass fromCommId = false: one
// fixed address for every new communicator would mix them.
ncclResult_t makeUniqueId(UniqueIdLayout* id, bool fromCommId = true);
bool uniqueIdValid(const UniqueIdLayout& id);
// Tells an id's root thread that it will not be used (it exits). Best effort.
void releaseRoot(const UniqueIdLayout& id);

class Bootstrap {
 public:
  ~Bootstrap();
  ncclResult_t init(const UniqueIdLayout& id, int rank, int nranks, const std::atomic<uint32_t>* abortFlag);

  // all holds nranks slots of `bytes`; this rank's slot is filled by the caller.
  ncclResult_t allgather(void* all, size_t bytes);
  ncclResult_t barrier();
  // A new authenticated connection to `peer`'s listener / from `peer`, identified by (purpose, tag);
  // `dl`: the caller's deadline (with its give-up check), else the bootstrap's own.
  ncclResult_t connectPeer(int peer, Purpose purpose, int tag, int* fd, const Deadline* dl = nullptr);
  ncclResult_t acceptPeer(int peer, Purpose purpose, int tag, int* fd, const Deadline* dl = nullptr);
  // Wakes everything blocked on this bootstrap (abort): peers see the ring close.
  void shutdownAll();

  const NetIf& netif() const { return netif_; }
  const uint8_t* secret() const { return secret_; }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

 private:
  ncclResult_t rendezvous(const UniqueIdLayout& id);
  Deadline deadline() const { return Deadline(abort_); }

  int rank_ = -1, nranks_ = 0;
  const std::atomic<uint32_t>* abort_ = nullptr;
  uint8_t secret_[kSecretBytes] = {};
  NetIf netif_;
  int listenFd_ = -1;
  std::atomic<int> nextFd_{-1}, prevFd_{-1};  // shutdownAll may read them while init sets them
  SockAddr listenAddr_ = {};
  std::vector<SockAddr> peers_;
  uint8_t session_[kSessionBytes] = {};  // bootstrapSession of peers_
  std::string gateName_;
  std::unique_ptr<HelloGate> gate_;  // reads the hellos of connections to listenFd_
  std::shared_ptr<RootStop> rootStop_;  // rank 0 of NCCL_COMM_ID: ends its root's wait
  std::mutex acceptMu_;
  std::map<std::tuple<int, int, int>, int> stash_;  // (peer, purpose, tag) -> fd accepted early
};

}  // namespace accl
