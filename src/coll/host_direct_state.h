// Internal to the host direct collectives (coll/host_direct.h): the slots
// that every rank of the host maps, and a communicator's state. Shared by
// host_direct_setup.cc (init, windows) and host_direct.cc (the calls).
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "coll/host_direct.h"
#include "core/comm.h"

namespace accl {

// Calls this small carry their input in the slots' segment itself: each rank
// has kDescs payloads after the slots, used in turn, each as large as rank 0's
// inline bound (ACCL_DIRECT_INLINE_BYTES, at most kInlineBytes), which the
// bound the ranks agree on never exceeds.
constexpr size_t kInlineBytes = 16384;

// How many calls' descriptions (and payloads) a rank's slot holds, used in
// turn: a rank may publish call c once every rank finished call c - kDescs,
// so a rank that waits for no other in a call (a reduce's non-root, a
// broadcast's root) may run up to kDescs - 1 calls ahead.
constexpr int kDescs = 8;

// Inline calls of at most this many input bytes carry them in the call's
// description: one cache line then brings a peer all it needs.
constexpr size_t kSmallBytes = 24;

// A call as a rank publishes it: one cache line.
struct alignas(64) CallDesc {
  std::atomic<uint64_t> call;  // the call described here (stored last): inline calls wait on it
  int8_t kind, type, op, unused;
  int32_t root;
  uint64_t bytes;  // the call's count in bytes
  // This rank's PreMulSum scalar, for its own input, in the one field of
  // Scalar that the datatype uses (ScalarOf): the bits of `f` for floating
  // types, `i` for integers.
  uint64_t scalar;
  // Every host collective this rank ran on the communicator so far, this one
  // included, hashed in order (HostDirect::sig): a reader that finds another
  // rank's different learns of a difference in a call that no rank compared
  // (every rank a broadcast's root, say) or of a call that one rank skipped.
  uint64_t sig;
  struct Where {
    int32_t sendWin, recvWin;  // the windows the buffers lie in, or -1: sendAt/recvAt are addresses
    uint64_t sendAt, recvAt;   // offsets in the windows, or addresses in the rank's process
  };
  union {
    Where where;                // direct calls
    char small[kSmallBytes];    // inline calls of at most kSmallBytes: the input
  };
};
static_assert(sizeof(CallDesc) == 64, "a call's description is one cache line");

// A rank's slot, in the segment every rank maps: two lines of counters, then
// kDescs descriptions, a line each, so that a peer polling one line is not
// slowed by writes to another. Calls take the descriptions in turn: an inline
// call has no closing barrier, so a rank may publish the next calls while
// others still read this one's; it publishes call c only once every rank's
// `finished` reached c - kDescs (host_direct.cc).
struct alignas(128) Slot {
  std::atomic<int32_t> failed;  // this rank failed or stopped: the others leave their direct calls
  char rarelyWritten[60];       // so the peers keep `failed` cached between calls
  std::atomic<uint64_t> published;  // the call whose buffers are described (direct calls wait on it)
  std::atomic<uint64_t> finished;   // the last call whose part this rank moved
  std::atomic<uint64_t> left;       // the last call this rank returned from (touches no buffer of it)
  char ownerWritten[40];
  CallDesc desc[kDescs];            // call c's is desc[c % kDescs]
};
static_assert(sizeof(Slot) == 128 + 64 * kDescs, "two lines of counters, then the descriptions");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "slots are shared between processes");

// Rank k's buffer in a call, as this rank reaches it: `here`, an address in
// this process (its own, a rank of this process, a window mapped here), or
// else `there`, an address in rank k's process, through cross memory attach.
struct Reach {
  char* here = nullptr;
  uint64_t there = 0;
};

class HostDirect {
 public:
  // `owner`: the segment's name, which this rank made and unlinks at the latest here.
  HostDirect(ncclComm* comm, void* map, size_t bytes, size_t payloadBytes, std::string owner = {})
      : slots(static_cast<Slot*>(map)), payloadBytes(payloadBytes), seenFinished(comm->nranks), in(comm->nranks), out(comm->nranks), scalars(comm->nranks),
        order(comm->nranks), src(comm->nranks), comm_(comm), bytes_(bytes), owner_(std::move(owner)) {
    comm_->directStopWord.store(&slots[comm->rank].failed);
  }
  ~HostDirect() {
    slots[comm_->rank].failed.store(1);  // destroyed: a peer in a direct call leaves it at once
    comm_->directStopWord.store(nullptr);
    munmap(slots, bytes_);
    unlink();
  }
  // Every rank has mapped the segment: its name is no longer needed.
  void unlink() {
    if (!owner_.empty()) shm_unlink(owner_.c_str());
    owner_.clear();
  }

  Slot* slots;
  const size_t payloadBytes;  // the room for one inline call's input (rank 0's bound)
  // Rank k's input of call `call`, when it runs inline.
  char* payload(int k, uint64_t call) const {
    char* base = reinterpret_cast<char*>(slots + comm_->nranks);
    return base + (static_cast<size_t>(k) * kDescs + call % kDescs) * payloadBytes;
  }
  uint64_t calls = 0;        // direct calls this rank made
  uint64_t sig = 0;          // CallDesc::sig: every host collective so far, inline, direct or not
  std::vector<uint64_t> seenFinished;  // each rank's `finished` as this rank last read it
  bool anyBuffer = false;    // every rank reaches every other's memory: calls need no windows
  int64_t inlineBytes = 0;   // calls up to this size run inline (every rank's agreed bound)
  int64_t minBytes = 0;      // calls from this size run direct (likewise)
  bool announced = false;    // the first direct call's INFO line is out
  bool announcedInline = false;  // and the first inline call's
  std::vector<char> scratch;  // chunks read through cross memory attach
  // A call's per-rank state, sized once: a communicator runs one call at a
  // time, and small calls should not pay for allocations.
  std::vector<Reach> in, out;
  std::vector<Scalar> scalars;
  std::vector<int> order;
  std::vector<const char*> src;

 private:
  ncclComm* comm_;
  size_t bytes_;
  std::string owner_;
};

}  // namespace accl
