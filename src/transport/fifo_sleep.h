// Sleeping until FIFO counters move. Threads that wait for a peer spin, then
// yield, then nap (core/wait.h's Backoff). A thread that may idle for long (the
// one-sided receiver, the socket proxies) sleeps in the kernel instead, on the
// low 32 bits of the counters it waits for (a futex, shared between processes
// like the FIFO), and whoever advances a counter wakes the sleepers. With no
// sleeper, advancing costs one load more.
#pragma once

#include <atomic>
#include <cstdint>

namespace accl {

void fifoWake(std::atomic<uint64_t>* counter);

// Stores `value` in `counter`, then wakes the threads asleep on it.
inline void fifoAdvance(std::atomic<uint64_t>* counter, std::atomic<uint32_t>* sleepers, uint64_t value) {
  counter->store(value, std::memory_order_seq_cst);
  if (sleepers->load(std::memory_order_seq_cst) != 0) fifoWake(counter);
}

// Sleeps until counters[i] differs from seen[i] for some i < n, a wake, or
// `timeoutMs`; may return early. Registers in sleepers[i] meanwhile, so that
// fifoAdvance wakes it.
void fifoSleep(std::atomic<uint64_t>* const* counters, std::atomic<uint32_t>* const* sleepers, const uint64_t* seen,
               int n, int timeoutMs);

// One counter.
inline void fifoSleep(std::atomic<uint64_t>* counter, std::atomic<uint32_t>* sleepers, uint64_t seen, int timeoutMs) {
  fifoSleep(&counter, &sleepers, &seen, 1, timeoutMs);
}

}  // namespace accl
