#include "base/workers.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "base/check.h"
#include "base/threads.h"

namespace accl {
namespace {

class Pool {
 public:
  struct Task {
    std::function<void()> work;
    std::function<void()> done;  // after the thread counts as idle again: a caller told so finds it idle
  };

  // Queues every task for a thread of the pool: idle ones, and new ones where
  // too few are idle (a task must never wait for a thread: it may be the one
  // that the busy threads' tasks wait for). Tasks may wait for each other, so
  // all run or none does: when a thread cannot start (the process or user is
  // at its thread limit), none is queued and the error is returned.
  ncclResult_t runAll(std::vector<Task>& tasks) {
    std::lock_guard<std::mutex> lock(mu_);
    const long spare = idle_ - static_cast<long>(queue_.size());
    for (long k = std::max(0L, spare); k < static_cast<long>(tasks.size()); ++k) {
      std::thread t;
      NCCLCHECK(startThread(&t, [this] { serve(); }, "a thread for %zu jobs that must run at once (none of them ran)",
                            tasks.size() + 1));
      t.detach();
      ++idle_;  // from now on: it takes a task as soon as it has the lock
    }
    for (auto& task : tasks) {
      queue_.push_back(std::move(task));
      cv_.notify_one();
    }
    return ncclSuccess;
  }

 private:
  void serve() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return !queue_.empty(); });
      Task task = std::move(queue_.front());
      queue_.pop_front();
      --idle_;
      lock.unlock();
      task.work();
      lock.lock();
      ++idle_;
      if (task.done) task.done();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;  // tasks no thread took yet
  long idle_ = 0;           // threads not running a task (some may not have reached the wait yet)
};

// Never destroyed (threads may outlive static destructors). A forked child has
// none of the parent's threads, and its copy of the pool may be locked: it
// starts a new one. The handler registers while the library loads (see
// base/fork_safe.h for why never later).
std::atomic<Pool*> pool{nullptr};
const int poolRenewedAtFork = pthread_atfork(nullptr, nullptr, [] {
  if (pool.load()) pool.store(new Pool());
});

Pool& thePool() {
  static std::once_flag once;
  std::call_once(once, [] { pool.store(new Pool()); });
  return *pool.load();
}

}  // namespace

ncclResult_t runConcurrently(const std::vector<std::function<ncclResult_t()>>& jobs, bool* ran) {
  if (ran) *ran = true;
  if (jobs.empty()) return ncclSuccess;
  const size_t n = jobs.size();
  std::vector<ncclResult_t> results(n, ncclSuccess);
  std::mutex mu;
  std::condition_variable cv;
  size_t left = n - 1;
  std::vector<Pool::Task> tasks;
  for (size_t i = 1; i < n; ++i) {
    tasks.push_back({[&, i] { results[i] = jobs[i](); },
                     [&] {
                       std::lock_guard<std::mutex> lock(mu);
                       if (--left == 0) cv.notify_one();
                     }});
  }
  if (!tasks.empty()) {
    const ncclResult_t r = thePool().runAll(tasks);
    if (r != ncclSuccess) {
      if (ran) *ran = false;
      return r;
    }
  }
  results[0] = jobs[0]();
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return left == 0; });
  }
  for (ncclResult_t r : results)
    if (r != ncclSuccess) return r;
  return ncclSuccess;
}

}  // namespace accl
