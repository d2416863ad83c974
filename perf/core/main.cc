// main() of every driver: options, processes and threads, communicators,
// the benchmark, the footer. The collective comes from driverCollective(),
// defined by the one file of perf/colls/ linked into the binary.
#include <cstdio>
#include <thread>
#include <vector>

#include "core/bench.h"
#include "core/watchdog.h"

namespace perf {
namespace {

void threadMain(Shared* s, int thread) {
  RankSet ranks(s, thread);
  ranks.init();
  s->deviceLines[size_t(thread)] = ranks.describe();
  s->team->barrier();
  if (thread == 0) {
    std::string mine;
    for (const std::string& l : s->deviceLines) mine += l;
    std::vector<std::string> all = s->world->gather(mine);
    if (s->report) {
      s->report->devices(all);
      s->report->header();
    }
    watchdogKick();
  }
  s->team->barrier();
  runBenchmark(s, &ranks);
  s->team->barrier();
  ranks.destroy();
}

int run(int argc, char** argv) {
  const Collective& coll = driverCollective();
  Options opts;
  int rc = parseOptions(argc, argv, coll.program, &opts);
  if (rc >= 0) return rc;

  World world;
  world.init(&argc, &argv);
  Shared s;
  s.coll = &coll;
  s.opts = opts;
  s.world = &world;
  s.nranks = world.nprocs() * opts.nThreads * opts.nGpus;
  s.localDeviceBase = world.localProc() * opts.nThreads * opts.nGpus;
  if (coll.hasRoot && opts.root >= s.nranks) {
    std::fprintf(stderr, "%s: invalid root %d: there are %d ranks (use 0..%d, or -r all)\n", coll.program, opts.root,
                 s.nranks, s.nranks - 1);
    world.finalize();
    return 2;
  }
  Team team(&world, opts.nThreads);
  s.team = &team;
  Report report(coll.program, s.opts);
  if (world.proc() == 0) s.report = &report;
  watchdogStart(coll.program, opts.timeoutSec, opts.nThreads);

  int version = 0;
  ncclResult_t r = ncclGetVersion(&version);
  if (r != ncclSuccess) failCall(s, world.proc() * opts.nThreads * opts.nGpus, "ncclGetVersion", r, nullptr);
  if (s.report) report.preamble(NCCL_VERSION_CODE, version);
  if (world.proc() == 0) {
    r = ncclGetUniqueId(&s.id);
    if (r != ncclSuccess) failCall(s, 0, "ncclGetUniqueId", r, nullptr);
  }
  world.broadcastId(&s.id);

  s.deviceLines.resize(size_t(opts.nThreads));
  std::vector<std::thread> threads;
  for (int t = 1; t < opts.nThreads; t++) threads.emplace_back(threadMain, &s, t);
  threadMain(&s, 0);
  for (std::thread& t : threads) t.join();

  double avg = s.busbwCount ? s.busbwSum / s.busbwCount : 0;
  if (s.report) {
    if (s.skippedTests) std::printf("# Skipped %d of %d tests\n", s.skippedTests, s.skippedTests + s.testsRun);
    report.footer(s.failedParts, avg);
    std::string err;
    if (!report.writeFiles(s.nranks, s.failedParts, avg, &err)) {
      std::fprintf(stderr, "%s: %s\n", coll.program, err.c_str());
      rc = 1;
    }
  }
  watchdogStop();
  world.finalize();
  if (s.failedParts) rc = 1;
  return rc < 0 ? 0 : rc;
}

}  // namespace
}  // namespace perf

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return perf::run(argc, argv);
}
