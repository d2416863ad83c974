#include "core/bench.h"

#include <chrono>

#include "core/watchdog.h"

namespace perf {
namespace {

double seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

class Bench {
 public:
  Bench(Shared* s, RankSet* r) : s_(s), ranks_(r), o_(s->opts) {}

  void runAll() {
    const Collective& c = *s_->coll;
    std::vector<Op> ops = c.takesOp ? o_.ops : std::vector<Op>{Op::None};
    std::vector<int> roots{-1};
    if (c.hasRoot && o_.root >= 0) roots = {o_.root};
    if (c.hasRoot && o_.root < 0) {
      roots.clear();
      for (int r = 0; r < s_->nranks; r++) roots.push_back(r);
    }
    for (ncclDataType_t type : o_.types) {
      for (Op op : ops) {
        for (int root : roots) {
          if (!runTest(TestParams{type, op, root})) break;  // refused: the other roots would be too
        }
      }
    }
  }

 private:
  bool reporter() const { return s_->report && ranks_->thread() == 0; }
  bool thread0() const { return ranks_->thread() == 0; }
  const char* shownOp(Op op) const { return s_->coll->takesOp ? opName(op) : "none"; }

  // One datatype / operator / root: false when the library refused it.
  bool runTest(const TestParams& t) {
    const Collective& c = *s_->coll;
    // Refusals are skips only when sweeping datatypes or operators.
    bool probe = o_.allTypes || (c.takesOp && o_.allOps);
    std::string why;
    s_->team->barrier();
    Layout large = makeLayout(c, o_.maxBytes, t.type, s_->nranks);
    Layout small = makeLayout(c, o_.minBytes, t.type, s_->nranks);
    bool ok = true;
    int warmups = o_.warmupIters > 0 ? o_.warmupIters : 1;  // at least the probing call
    for (int w = 0; w < warmups && ok; w++) ok = ranks_->start(t, large, false, w, probe && w == 0, &why);
    if (ok) ranks_->complete();
    if (probe && s_->team->combine(ok ? 0 : 1, Team::kMax, ranks_->thread()) > 0) {
      if (reporter()) s_->report->skipped(typeInfo(t.type).name, shownOp(t.op), ok ? "refused by another rank" : why);
      if (thread0()) s_->skippedTests++;
      return false;
    }
    for (int w = 0; w < o_.warmupIters; w++) ranks_->start(t, small, false, w, false, nullptr);
    ranks_->complete();
    if (thread0()) s_->testsRun++;

    for (int cycle = 0; o_.runCycles == 0 || cycle < o_.runCycles; cycle++) {
      for (size_t size = o_.minBytes; size <= o_.maxBytes;) {
        Layout l = makeLayout(c, size, t.type, s_->nranks);
        Row row;
        row.bytes = l.totalBytes();
        row.count = l.counts.param;
        row.type = typeInfo(t.type).name;
        row.op = shownOp(t.op);
        row.root = c.hasRoot ? t.root : -1;
        for (int inPlace = 0; inPlace < 2; inPlace++) row.part[inPlace] = benchTime(t, l, inPlace != 0);
        if (thread0()) {
          for (const PartResult& p : row.part) {
            s_->busbwSum += p.busbw;
            s_->busbwCount++;
            if (p.checked && p.wrong > 0) s_->failedParts++;
          }
          watchdogKick();
        }
        if (reporter()) s_->report->row(row);
        if (o_.stepFactor > 1) {
          if (size > o_.maxBytes / o_.stepFactor) break;
          size *= o_.stepFactor;
        } else {
          if (o_.stepBytes == 0 || size > o_.maxBytes - o_.stepBytes) break;
          size += o_.stepBytes;
        }
      }
    }
    return true;
  }

  // Times `iters` x `agg_iters` calls and checks `check` more (nccl-tests' BenchTime).
  PartResult benchTime(const TestParams& t, const Layout& l, bool inPlace) {
    const Collective& c = *s_->coll;
    Team& team = *s_->team;
    int thread = ranks_->thread();
    if (o_.check) ranks_->fill(t, l, inPlace, ++seed_);
    ranks_->start(t, l, inPlace, 0, false, nullptr);
    ranks_->complete();
    team.barrier();

    double start = 0, cpu = 0, elapsed = 0;
    long long calls = (long long)o_.iters * o_.aggIters;
    std::vector<void*> graphs;
    if (o_.cudaGraphs > 0) ranks_->beginCapture();
    else start = seconds();
    for (int iter = 0; iter < o_.iters; iter++) {
      if (o_.aggIters > 1) groupCall(ncclGroupStart(), "ncclGroupStart");
      for (int a = 0; a < o_.aggIters; a++) ranks_->start(t, l, inPlace, iter * o_.aggIters + a, false, nullptr);
      if (o_.aggIters > 1) groupCall(ncclGroupEnd(), "ncclGroupEnd");
    }
    if (o_.cudaGraphs > 0) {
      ranks_->endCapture(&graphs);
      team.barrier();
      start = seconds();
      for (int g = 0; g < o_.cudaGraphs; g++) ranks_->launch(graphs);
      calls *= o_.cudaGraphs;
    }
    cpu = (seconds() - start) / double(calls);
    ranks_->complete();
    elapsed = (seconds() - start) / double(calls);
    for (void* g : graphs) destroyGraph(g);

    Team::Reduce how = Team::Reduce(o_.average);
    elapsed = team.combine(elapsed, how, thread);
    cpu = team.combine(cpu, how, thread);
    double sec = o_.reportCpuTime ? cpu : elapsed;
    PartResult part;
    part.timeUs = sec * 1e6;
    double bytes = double(l.counts.param) * double(l.elt) * c.algFactor(s_->nranks);
    part.algbw = sec > 0 ? bytes / 1e9 / sec : 0;
    part.busbw = part.algbw * c.busFactor(s_->nranks);
    team.barrier();

    for (int rep = 0; rep < o_.check; rep++) {
      uint32_t seed = ++seed_;
      ranks_->fill(t, l, inPlace, seed);
      ranks_->start(t, l, inPlace, 0, false, nullptr);
      ranks_->complete();
      part.wrong = team.sum(ranks_->check(t, l, inPlace, seed));
      if (part.wrong) break;
    }
    part.checked = o_.check > 0 && (!inPlace || c.checkInPlace);
    if (!part.checked) part.wrong = 0;
    return part;
  }

  void groupCall(ncclResult_t r, const char* call) {
    if (r != ncclSuccess) failCall(*s_, ranks_->firstRank(), call, r, nullptr);
  }

  Shared* s_;
  RankSet* ranks_;
  const Options& o_;
  uint32_t seed_ = 0;  // advances identically on every thread, so all ranks agree on the data
};

}  // namespace

void runBenchmark(Shared* s, RankSet* ranks) { Bench(s, ranks).runAll(); }

}  // namespace perf
