// The communicator. One per rank; created by the init calls, used by every
// collective, torn down by finalize/destroy/abort.
//
// Threads: the owning user thread runs collectives; socket proxy threads move
// data for net connections; ncclCommAbort may come from any thread. abortFlag
// and asyncError are atomics for that reason; everything else is written only
// during init (before the comm is handed out) or teardown (after inFlight == 0).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/config.h"
#include "transport/connection.h"

namespace accl {

constexpr uint64_t kCommMagic = 0x6c6c6363612d636dull;  // "mc-accll"
constexpr uint64_t kCommDeadMagic = 0x646165642d636d6dull;

// What every rank tells the others at init.
struct PeerInfo {
  int32_t rank;
  int32_t pid;
  uint64_t hostHash;
  int32_t cudaDev;
  int32_t deviceMode;
  uint64_t nonce;  // random; rank 0's makes the comm hash unique even for a reused NCCL_COMM_ID
  char hostname[64];
};

// The ring the allreduce runs on: order[i] is the rank at ring position i.
struct Ring {
  std::vector<int> order;
  int position = 0;  // this rank's index in order
  int prev = -1, next = -1;
  ConnPtr send, recv;
};

}  // namespace accl

struct ncclComm {
  uint64_t magic = accl::kCommMagic;
  int rank = -1, nranks = 0, cudaDev = -1;
  bool deviceMode = false;
  accl::CommConfig config;
  uint64_t commHash = 0;  // unique per communicator; names shared-memory segments
  std::string name;       // config commName or "comm <hash>"

  std::atomic<uint32_t> abortFlag{0};
  std::atomic<int> asyncError{ncclSuccess};
  std::atomic<int> failedRank{-1};   // the rank whose failure broke this comm, when known
  std::atomic<int> inFlight{0};      // calls currently using the comm (abort waits for them)
  std::atomic<bool> initDone{false};
  std::thread initThread;            // non-blocking init runs here

  std::unique_ptr<accl::Bootstrap> bootstrap;
  std::vector<accl::PeerInfo> peers;
  accl::Ring ring;
  uint64_t opCount = 0;
};

namespace accl {

// The comm handle is one we made and is still alive (not destroyed).
bool commValid(const ncclComm* comm);
void registerComm(ncclComm* comm);
void unregisterComm(ncclComm* comm);

// Marks the communicator failed (first error wins) and wakes every waiter:
// sets abort on all FIFOs so peers stop waiting too.
void commSetError(ncclComm* comm, ncclResult_t err);
// Full init of an allocated comm (bootstrap, peer exchange, transports).
ncclResult_t commInit(ncclComm* comm, const UniqueIdLayout& id, int nranks, int rank);
// Abort: flag, wake, wait for in-flight calls, free.
void commFree(ncclComm* comm);

uint64_t hostHash();
bool processAlive(pid_t pid);

// Keeps inFlight raised for the duration of an API call.
class CommUse {
 public:
  explicit CommUse(ncclComm* c) : c_(c) { c_->inFlight.fetch_add(1); }
  ~CommUse() { c_->inFlight.fetch_sub(1); }

 private:
  ncclComm* c_;
};

}  // namespace accl
