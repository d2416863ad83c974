// all_gather_perf: ncclAllGather. Each rank contributes count/n elements and
// ends with all n blocks in rank order; algbw counts the gathered bytes,
// busbw = algbw * (n-1)/n. In place: rank r's block already sits at r in the output.
#include "core/collective.h"

namespace perf {
namespace {

Counts counts(size_t count, int n) {
  Counts c;
  c.param = c.send = count / n;
  c.recv = c.param * n;
  c.sendInPlace = c.param;
  return c;
}
double algFactor(int n) { return n; }
double busFactor(int n) { return double(n - 1) / n; }
double input(const Pattern& p, int rank, int, int, size_t i) { return p.value(rank, i); }
bool expected(const Pattern& p, int, int, int, size_t param, size_t i, double* want) {
  *want = p.value(int(i / param), i % param);
  return true;
}
ncclResult_t run(const CallArgs& a) {
  return ncclAllGather(a.send, a.recv, a.count, a.type, a.comm, a.stream);
}

}  // namespace

const Collective& driverCollective() {
  static const Collective c{"all_gather_perf", "ncclAllGather", false, false, true,
                            counts, algFactor, busFactor, input, expected, run};
  return c;
}

}  // namespace perf
