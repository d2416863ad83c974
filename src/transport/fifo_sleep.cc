#include "transport/fifo_sleep.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <vector>

namespace accl {
namespace {

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
constexpr uint32_t kFutex32 = 2;  // FUTEX2_SIZE_U32

// One entry of futex_waitv (Linux 5.16), declared here so older headers build.
struct WaitV {
  uint64_t val;
  uint64_t uaddr;
  uint32_t flags;
  uint32_t reserved;
};

// The counter's low 32 bits: what the futex compares and sleeps on.
uint32_t* low(std::atomic<uint64_t>* c) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the low word comes first");
  return reinterpret_cast<uint32_t*>(c);
}

timespec after(int ms) {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += ms / 1000;
  t.tv_nsec += (ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec += 1;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

std::atomic<bool> noWaitv{false};  // futex_waitv is missing or refused (seccomp): nap instead

void nap() {
  timespec t{0, 100000};  // 100 us, as base/wait.h's Backoff
  nanosleep(&t, nullptr);
}

}  // namespace

void fifoWake(std::atomic<uint64_t>* counter) {
  (void)syscall(SYS_futex, low(counter), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void fifoSleep(std::atomic<uint64_t>* const* counters, std::atomic<uint32_t>* const* sleepers, const uint64_t* seen,
               int n, int timeoutMs) {
  if (n <= 0) return nap();  // nothing to wait on: do not spin
  for (int i = 0; i < n; ++i) sleepers[i]->fetch_add(1, std::memory_order_seq_cst);
  bool moved = false;  // checked after registering: a move before it is seen here, one after it wakes us
  for (int i = 0; i < n && !moved; ++i) moved = counters[i]->load(std::memory_order_seq_cst) != seen[i];
  if (!moved) {
    if (n == 1) {
      timespec rel{timeoutMs / 1000, (timeoutMs % 1000) * 1000000L};
      (void)syscall(SYS_futex, low(counters[0]), FUTEX_WAIT, static_cast<uint32_t>(seen[0]), &rel, nullptr, 0);
    } else if (n <= 128 && !noWaitv.load(std::memory_order_relaxed)) {  // FUTEX_WAITV_MAX
      std::vector<WaitV> w(n);
      for (int i = 0; i < n; ++i)
        w[i] = WaitV{static_cast<uint32_t>(seen[i]), reinterpret_cast<uint64_t>(low(counters[i])), kFutex32, 0};
      timespec until = after(timeoutMs);
      if (syscall(SYS_futex_waitv, w.data(), n, 0, &until, CLOCK_MONOTONIC) < 0 && errno != EAGAIN &&
          errno != ETIMEDOUT && errno != EINTR)
        noWaitv.store(true, std::memory_order_relaxed);  // ENOSYS, or EPERM from a seccomp filter
    }
    if (n > 1 && (n > 128 || noWaitv.load(std::memory_order_relaxed))) nap();
  }
  for (int i = 0; i < n; ++i) sleepers[i]->fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace accl
