// membw: the host memory bandwidth a rank can use, the physical limit for
// host-mode collectives. For each size: memcpy (read + write) and y += x on
// float32 (the inner loop of a reduction: two reads, one write), timed per
// thread with every thread on its own buffers and its own CPU, as the ranks
// of a perf run are. Prints GB/s of memory traffic per thread and in total.
//
//   membw [-t THREADS] [-b MINBYTES] [-e MAXBYTES] [-f FACTOR]
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = strtod(s, &end);
  switch (*end) {
    case 'K': case 'k': v *= 1 << 10; break;
    case 'M': case 'm': v *= 1 << 20; break;
    case 'G': case 'g': v *= 1 << 30; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

void pinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)sched_setaffinity(0, sizeof set, &set);
}

struct Result {
  double copySec = 0, addSec = 0;
};

// Repeats each kernel until ~0.2 s have passed; returns seconds per pass.
Result measure(size_t bytes) {
  std::vector<float> x(bytes / sizeof(float), 1.0f), y(bytes / sizeof(float), 2.0f);
  const size_t n = x.size();
  auto timeIt = [](auto&& body) {
    using Clock = std::chrono::steady_clock;
    body();  // warm: pages touched, caches filled
    int iters = 0;
    auto t0 = Clock::now();
    double elapsed = 0;
    do {
      body();
      ++iters;
      elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (elapsed < 0.2);
    return elapsed / iters;
  };
  Result r;
  r.copySec = timeIt([&] {
    memcpy(y.data(), x.data(), n * sizeof(float));
    x[n / 2] += 1;  // keep the copies from being merged away
  });
  r.addSec = timeIt([&] {
    for (size_t i = 0; i < n; ++i) y[i] += x[i];
  });
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  size_t minBytes = 1 << 20, maxBytes = 64 << 20, factor = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string f = argv[i];
    if (f == "-t") threads = std::max(1, atoi(argv[i + 1]));
    else if (f == "-b") minBytes = parseSize(argv[i + 1]);
    else if (f == "-e") maxBytes = parseSize(argv[i + 1]);
    else if (f == "-f") factor = std::max<size_t>(2, parseSize(argv[i + 1]));
    else {
      fprintf(stderr, "usage: membw [-t THREADS] [-b MINBYTES] [-e MAXBYTES] [-f FACTOR]\n");
      return 2;
    }
  }
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  printf("# membw: %d thread(s), each on its own CPU (of %d) and buffers; GB/s of memory traffic\n", threads, cpus);
  printf("# %12s %14s %14s %16s %16s\n", "bytes", "copy/thread", "copy total", "y+=x/thread", "y+=x total");
  for (size_t bytes = std::max<size_t>(minBytes, 4096); bytes <= maxBytes; bytes *= factor) {
    std::vector<Result> results(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        if (threads <= cpus) pinTo(t);
        results[t] = measure(bytes);
      });
    for (auto& th : pool) th.join();
    double copy = 0, add = 0;
    for (const Result& r : results) {
      copy += 2.0 * bytes / r.copySec / 1e9;  // read + write
      add += 3.0 * bytes / r.addSec / 1e9;    // two reads, one write
    }
    printf("  %12zu %14.1f %14.1f %16.1f %16.1f\n", bytes, copy / threads, copy, add / threads, add);
  }
  return 0;
}
