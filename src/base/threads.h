// Starting a thread without an exception: std::thread throws std::system_error
// where none can start (the process or its user at a thread limit: ulimit -u,
// a cgroup's pids.max), and an exception must not cross the C ABI.
#pragma once

#include <functional>
#include <thread>

#include "nccl.h"

namespace accl {

// Starts *t running f(); else a WARN naming the thread (printf's `what` and
// arguments, formatted only then: the reader wants to know which rank or peer
// it would have served) and ncclSystemError.
ncclResult_t startThread(std::thread* t, std::function<void()> f, const char* what, ...)
    __attribute__((format(printf, 3, 4)));

// How many threads that startThread started are running now (never more than
// are: each counts itself once it runs, and uncounts itself before it ends).
int libraryThreads();

}  // namespace accl
