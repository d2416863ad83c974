// Locks that fork() must find free. fork() takes each one before it forks and
// frees it again in both processes, so that a child never inherits a lock held
// by a thread it does not have (its first call would wait forever).
#pragma once

#include <pthread.h>

#include <mutex>

namespace accl {

// Define one at namespace scope, so that it registers while the library loads,
// before any thread can be inside the library. A handler registered while
// another thread forks runs in only one half of that fork (glibc's prepare loop
// skips a handler added while it runs; the parent and child loops do not), so
// a lazily registered one unlocked a lock it never took, held by another thread.
//
// Such a lock must be a leaf: code that holds it takes no other lock of the
// library's. fork() takes these locks in the reverse of the order they
// registered in, which is the link order, not one we chose, so a thread that
// holds one while it waits for another could deadlock against fork().
template <std::mutex& (*Lock)()>
struct HeldAcrossFork {
  HeldAcrossFork() { pthread_atfork(take, give, give); }

 private:
  static void take() {
    Lock().lock();
    held = true;
  }
  // Frees only what this thread's prepare step took (a child is a copy of the
  // forking thread, and so sees its flag).
  static void give() {
    if (!held) return;
    held = false;
    Lock().unlock();
  }
  static inline thread_local bool held = false;
};

}  // namespace accl
