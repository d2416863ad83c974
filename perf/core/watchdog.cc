#include "core/watchdog.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace perf {
namespace {

constexpr int kMaxThreads = 1024;
struct Slot {
  std::atomic<const char*> what{nullptr};
  std::atomic<int> rank{-1};
};
Slot gSlots[kMaxThreads];
const char* gProgram = "perf";
int gSeconds = 0;
int gThreads = 0;

// Async-signal-safe output.
void put(const char* s) { (void)!write(STDERR_FILENO, s, std::strlen(s)); }
void putInt(long v) {
  char buf[24];
  int i = sizeof buf;
  bool neg = v < 0;
  unsigned long u = neg ? 0ul - (unsigned long)v : (unsigned long)v;
  do buf[--i] = char('0' + u % 10), u /= 10; while (u && i > 1);
  if (neg) buf[--i] = '-';
  (void)!write(STDERR_FILENO, buf + i, sizeof buf - i);
}

void onAlarm(int) {
  put(gProgram);
  put(": watchdog: no progress for ");
  putInt(gSeconds);
  put(" s (-T); stopping.");
  for (int t = 0; t < gThreads && t < kMaxThreads; t++) {
    const char* what = gSlots[t].what.load();
    put(t ? "," : "");
    put(" rank ");
    putInt(gSlots[t].rank.load());
    put(": ");
    put(what ? what : "starting");
  }
  put("\n");
  _exit(3);
}

}  // namespace

void watchdogStart(const char* program, int seconds, int nthreads) {
  gProgram = program;
  gSeconds = seconds;
  gThreads = nthreads;
  if (seconds <= 0) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = onAlarm;
  sigaction(SIGALRM, &sa, nullptr);
  alarm(unsigned(seconds));
}

void watchdogKick() {
  if (gSeconds > 0) alarm(unsigned(gSeconds));
}

void watchdogDoing(int thread, int rank, const char* what) {
  if (thread < 0 || thread >= kMaxThreads) return;
  gSlots[thread].rank.store(rank);
  gSlots[thread].what.store(what);
}

void watchdogStop() {
  if (gSeconds > 0) alarm(0);
  gSeconds = 0;
}

}  // namespace perf
