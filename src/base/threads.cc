#include "base/threads.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <exception>
#include <system_error>
#include <utility>

#include "base/debug.h"

namespace accl {
namespace {

std::atomic<int> running{0};

}  // namespace

int libraryThreads() { return running.load(std::memory_order_acquire); }

ncclResult_t startThread(std::thread* t, std::function<void()> f, const char* what, ...) {
  const char* why = nullptr;
  bool limit = false;
  try {
    *t = std::thread([f = std::move(f)] {
      running.fetch_add(1, std::memory_order_acq_rel);
      f();
      running.fetch_sub(1, std::memory_order_acq_rel);
    });
    return ncclSuccess;
  } catch (const std::system_error& e) {
    why = e.what();
    limit = true;
  } catch (const std::exception& e) {  // bad_alloc, copying the function
    why = e.what();
  } catch (...) {
    why = "unknown exception";
  }
  char name[256];
  va_list args;
  va_start(args, what);
  vsnprintf(name, sizeof(name), what, args);
  va_end(args);
  WARN("cannot start %s: %s%s", name, why,
       limit ? " (the process or its user may be at a thread limit: ulimit -u, the cgroup's pids.max)" : "");
  return ncclSystemError;
}

}  // namespace accl
