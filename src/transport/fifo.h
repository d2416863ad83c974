// A connector's FIFO: kSlots data slots in memory the receiver reads, a `tail`
// counter the sender advances after filling a slot, a `head` counter the
// receiver advances after draining one. Where the memory lives (shared memory,
// a socket staging buffer) is the transport's business; algorithms see only this.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include "device/fifo_slots.h"

namespace accl {

// A large send between ranks of one host may post, instead of its data, one
// frame that says where the data is (coll/p2p.cc, "Pulled sends"): its size
// in FifoCtrl::bytes carries this flag (slots are at most 1 GiB), its
// payload is a PullFrame, and the receiver releases it once the message has
// moved from the sender's buffer into its own.
constexpr uint32_t kPullFrame = 0x80000000u;
struct PullFrame {
  uint64_t src;    // the send buffer, in the sender's process
  uint64_t bytes;  // the whole message
};

// The pulled message the receiver is taking now, in the FIFO's control page
// (after FifoCtrl: pullCtrl()) where both ends map it, shared memory only:
// the receiver takes chunks from the front and the sender, while it waits,
// writes chunks from the back into the receiver's buffer, so that both
// cores copy. `claim` holds both ends of the chunks still to move; each end
// takes one with a compare-and-swap. Each end counts the bytes of the chunks
// it took once it no longer touches them (`written`, `read`), even where the
// copy failed (the failure aborts the FIFO), so that the other end, leaving
// on an error, can wait for the one in flight.
struct alignas(64) PullCtrl {
  // 1 + the step of the frame described here (0: none), stored last by the
  // receiver with a compare-and-swap; or kPullWithdrawn | (1 + step): the
  // sender left on an error before the receiver described it.
  std::atomic<uint64_t> frame;
  uint64_t dst;                 // the receive buffer, in the receiver's process
  uint32_t senderWrites;        // 0: the sender must not write (the receive overlaps a send of its call)
  std::atomic<uint32_t> frameSleepers;  // a sender asleep until `frame` moves (transport/fifo_sleep.h)
  char pad0[40];
  // closed (1 bit) | frame tag (15) | next chunk from the front (24) | end of those from the back (24);
  // chunks of pullChunkBytes(the message), which each end works out from its own size
  std::atomic<uint64_t> claim;
  char pad1[56];
  std::atomic<uint64_t> written;  // bytes of the chunks the sender took and is done with
  std::atomic<uint32_t> writtenSleepers;  // a receiver asleep until `written` moves (transport/fifo_sleep.h)
  char pad2[52];
  std::atomic<uint64_t> read;     // bytes of the chunks the receiver took and is done with
  char pad3[56];
};
static_assert(sizeof(PullCtrl) == 256, "what each end writes on a line of its own");
constexpr uint64_t kPullWithdrawn = uint64_t{1} << 63;

struct alignas(64) FifoCtrl {
  std::atomic<uint64_t> tail;          // slots posted by the sender
  std::atomic<uint32_t> tailSleepers;  // threads asleep until tail moves (transport/fifo_sleep.h)
  // The payload of each posted slot, on tail's cache line: the sender writes
  // both and the receiver reads both, one line moving between cores per post.
  uint32_t bytes[kSlots];
  char pad0[20];
  std::atomic<uint64_t> head;          // slots consumed by the receiver
  std::atomic<uint32_t> headSleepers;
  char pad1[52];
  std::atomic<uint32_t> abort;      // set by either side on error: the other side stops waiting
  std::atomic<uint32_t> peerGone;   // set by a transport that saw its peer close (sockets)
  std::atomic<int32_t> failedRank;  // with abort: the rank whose failure started it (-1: unknown)
  int32_t senderPid, receiverPid;   // for liveness checks on one host (0: not checked)
};
static_assert(offsetof(FifoCtrl, head) == 64 && offsetof(FifoCtrl, abort) == 128, "one cache line per writer");
static_assert(sizeof(FifoCtrl) == 192, "device connectors place one every 256 bytes (transport/ipc.cc)");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "FIFO counters are shared across processes");

struct Fifo {
  FifoCtrl* ctrl = nullptr;
  char* data = nullptr;  // kSlots * slotBytes
  size_t slotBytes = 0;

  char* slot(uint64_t step) const { return data + (step % kSlots) * slotBytes; }
};

// Stops both ends' waits on this FIFO. The first known cause stays: a side
// that stops because of another rank's failure, or for no known reason (-1),
// must not replace the rank the other side named.
inline void fifoAbort(FifoCtrl* ctrl, int failedRank) {
  int32_t none = -1;
  if (failedRank >= 0) ctrl->failedRank.compare_exchange_strong(none, failedRank);
  ctrl->abort.store(1);
}

// The pulled message's state of a FIFO whose control page both ends map
// (Connection::sharedCtrl), at a fixed place in that page.
constexpr size_t kPullCtrlOffset = 1024;
static_assert(kPullCtrlOffset >= sizeof(FifoCtrl) && kPullCtrlOffset + sizeof(PullCtrl) <= 4096, "in the page");
inline PullCtrl& pullCtrl(const Fifo& f) {
  return *reinterpret_cast<PullCtrl*>(reinterpret_cast<char*>(f.ctrl) + kPullCtrlOffset);
}

// Bytes of one FIFO: control block (a page) plus the slots.
inline size_t fifoBytes(size_t slotBytes) { return 4096 + kSlots * slotBytes; }
inline void fifoInit(void* mem, size_t slotBytes, Fifo* f) {
  f->ctrl = new (mem) FifoCtrl();
  f->ctrl->tail.store(0);
  f->ctrl->head.store(0);
  f->ctrl->tailSleepers.store(0);
  f->ctrl->headSleepers.store(0);
  f->ctrl->abort.store(0);
  f->ctrl->peerGone.store(0);
  f->ctrl->failedRank.store(-1);
  f->data = static_cast<char*>(mem) + 4096;
  f->slotBytes = slotBytes;
}

}  // namespace accl
