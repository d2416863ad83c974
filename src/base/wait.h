// Bounded waiting. Every loop that waits for a peer holds a Deadline (the
// communicator's abort flag plus ACCL_TIMEOUT) and backs off with Backoff, so
// ranks may outnumber cores without burning them, and nothing waits forever.
#pragma once

#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "base/param.h"

namespace accl {

// Milliseconds and microseconds on the monotonic clock.
inline uint64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline uint64_t nowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  // seconds <= 0: no deadline (the abort flag is still honoured).
  explicit Deadline(const std::atomic<uint32_t>* abortFlag, int64_t seconds)
      : abort_(abortFlag), infinite_(seconds <= 0), start_(Clock::now()),
        end_(start_ + std::chrono::seconds(seconds > 0 ? seconds : 0)) {}
  explicit Deadline(const std::atomic<uint32_t>* abortFlag)
      : Deadline(abortFlag, paramInt(Param::Timeout)) {}

  // The abort flag is up, or the wait's give-up check (below) says it can
  // never end; either way the wait returns ncclInvalidUsage.
  bool aborted() const {
    return (abort_ && abort_->load(std::memory_order_relaxed) != 0) || (giveUp_ && giveUp_(giveUpCtx_));
  }
  // A check that ends the wait although the peer lives (one it waits for
  // that no thread can bring: core/self_wait.h). It says why in a WARN itself.
  using GiveUp = bool (*)(void* ctx);
  void giveUpWhen(GiveUp check, void* ctx) {
    giveUp_ = check;
    giveUpCtx_ = ctx;
  }
  bool expired() const { return !infinite_ && Clock::now() >= end_; }
  // A poll() timeout: at most sliceMs, never past the deadline.
  int pollMs(int sliceMs = 100) const {
    if (infinite_) return sliceMs;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now()).count();
    return left <= 0 ? 0 : (left < sliceMs ? static_cast<int>(left) : sliceMs);
  }
  int64_t seconds() const {
    return infinite_ ? 0 : std::chrono::duration_cast<std::chrono::seconds>(end_ - start_).count();
  }
  const std::atomic<uint32_t>* abortFlag() const { return abort_; }

 private:
  const std::atomic<uint32_t>* abort_;
  GiveUp giveUp_ = nullptr;
  void* giveUpCtx_ = nullptr;
  bool infinite_;
  Clock::time_point start_;  // one clock read for both
  Clock::time_point end_;
};

// Spin briefly, then yield, then sleep in growing steps (up to 100 us), so a
// waiting rank gives its core to the peer it is waiting for.
class Backoff {
 public:
  void pause() {
    ++iter_;
    if (iter_ < 64) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else if (iter_ < 256) {
      sched_yield();
    } else {
      long ns = iter_ < 1024 ? 2000 : 100000;
      struct timespec ts = {0, ns};
      nanosleep(&ts, nullptr);
    }
  }
  // Past spinning and yielding: a thread that can sleep until woken
  // (transport/fifo_sleep.h) should, instead of napping.
  bool napping() const { return iter_ >= 1024; }
  // Past spinning and yielding: a thread that idles most of the time (the
  // one-sided receiver) should sleep from here; its naps would take a core
  // from busy ranks for tens of milliseconds (timer slack makes each ~50 us).
  bool yielded() const { return iter_ >= 256; }
  // Whether this iteration should run the (costlier) deadline/liveness
  // checks: every 64th, not the first (a wait that ends within a few spins,
  // as most do, reads no clock).
  bool checkNow() const { return iter_ != 0 && (iter_ & 63) == 0; }
  void reset() { iter_ = 0; }

 private:
  uint32_t iter_ = 0;
};

}  // namespace accl
