#include "core/workers.h"

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace accl {
namespace {

class Pool {
 public:
  // Runs `task` on a thread of the pool: an idle one, or a new one when every
  // thread is busy (a task must never wait for a thread: it may be the one
  // that the busy threads' tasks wait for).
  void run(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    if (waiting_ >= static_cast<int>(queue_.size())) {
      cv_.notify_one();
    } else {
      std::thread([this] { serve(); }).detach();
    }
  }

 private:
  void serve() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++waiting_;
      cv_.wait(lock, [this] { return !queue_.empty(); });
      --waiting_;
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // tasks no thread took yet
  int waiting_ = 0;                          // threads waiting for a task
};

// Never destroyed (threads may outlive static destructors). A forked child has
// none of the parent's threads, and its copy of the pool may be locked: it
// starts a new one. The handler registers while the library loads (see
// core/fork_safe.h for why never later).
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

ncclResult_t runConcurrently(const std::vector<std::function<ncclResult_t()>>& jobs) {
  if (jobs.empty()) return ncclSuccess;
  const size_t n = jobs.size();
  std::vector<ncclResult_t> results(n, ncclSuccess);
  std::mutex mu;
  std::condition_variable cv;
  size_t left = n - 1;
  for (size_t i = 1; i < n; ++i) {
    thePool().run([&, i] {
      ncclResult_t r = jobs[i]();
      std::lock_guard<std::mutex> lock(mu);
      results[i] = r;
      if (--left == 0) cv.notify_one();
    });
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
