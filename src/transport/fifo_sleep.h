// Sleeping until FIFO counters move. Threads that wait for a peer spin, then
// yield, then nap (base/wait.h's Backoff). A thread that may idle for long (the
// one-sided receiver, the socket proxies) sleeps in the kernel instead, on the
// low 32 bits of the counters it waits for (a futex, shared between processes
// like the FIFO), and whoever advances a counter wakes the sleepers. With no
// sleeper, advancing costs one load more.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "transport/fifo.h"

namespace accl {

void fifoWake(std::atomic<uint64_t>* counter);

// Wakes the threads asleep on `counter` (registered in `sleepers`), if any.
inline void fifoWakeSleepers(std::atomic<uint64_t>* counter, std::atomic<uint32_t>* sleepers) {
  if (sleepers->load(std::memory_order_seq_cst) != 0) fifoWake(counter);
}

// Stores `value` in `counter`, then wakes the threads asleep on it.
inline void fifoAdvance(std::atomic<uint64_t>* counter, std::atomic<uint32_t>* sleepers, uint64_t value) {
  counter->store(value, std::memory_order_seq_cst);
  fifoWakeSleepers(counter, sleepers);
}

// Sleeps until counters[i] differs from seen[i] for some i < n, a wake, or
// `timeoutMs`; may return early. Registers in sleepers[i] meanwhile, so that
// fifoAdvance wakes it.
void fifoSleep(std::atomic<uint64_t>* const* counters, std::atomic<uint32_t>* const* sleepers, const uint64_t* seen,
               int n, int timeoutMs);

// The FIFO counters one thread waits for, gathered to sleep on at once:
// `seen` is the value that means "nothing new yet".
class FifoSleepSet {
 public:
  void tail(FifoCtrl* c, uint64_t seen) { add(&c->tail, &c->tailSleepers, seen); }
  void head(FifoCtrl* c, uint64_t seen) { add(&c->head, &c->headSleepers, seen); }
  void written(PullCtrl& p, uint64_t seen) { add(&p.written, &p.writtenSleepers, seen); }
  void frame(PullCtrl& p, uint64_t seen) { add(&p.frame, &p.frameSleepers, seen); }
  void sleep(int timeoutMs) {
    fifoSleep(counters_.data(), sleepers_.data(), seen_.data(), static_cast<int>(counters_.size()), timeoutMs);
  }

 private:
  void add(std::atomic<uint64_t>* counter, std::atomic<uint32_t>* sleepers, uint64_t seen) {
    counters_.push_back(counter);
    sleepers_.push_back(sleepers);
    seen_.push_back(seen);
  }
  std::vector<std::atomic<uint64_t>*> counters_;
  std::vector<std::atomic<uint32_t>*> sleepers_;
  std::vector<uint64_t> seen_;
};

// The FIFO's tail (head) moves: its sleepers wake.
inline void fifoPostTail(FifoCtrl* c, uint64_t tail) { fifoAdvance(&c->tail, &c->tailSleepers, tail); }
inline void fifoPostHead(FifoCtrl* c, uint64_t head) { fifoAdvance(&c->head, &c->headSleepers, head); }

}  // namespace accl
