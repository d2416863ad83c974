// A connector's FIFO: kSlots data slots in memory the receiver reads, a `tail`
// counter the sender advances after filling a slot, a `head` counter the
// receiver advances after draining one. Where the memory lives (shared memory,
// a socket staging buffer) is the transport's business; algorithms see only this.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

namespace accl {

constexpr int kSlots = 8;

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
