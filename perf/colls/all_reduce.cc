// all_reduce_perf: ncclAllReduce. Every rank ends with the reduction of all
// ranks' count elements; busbw = algbw * 2(n-1)/n.
#include "core/collective.h"

namespace perf {
namespace {

Counts counts(size_t count, int) {
  Counts c;
  c.send = c.recv = c.param = count;
  return c;
}
double algFactor(int) { return 1; }
double busFactor(int n) { return 2.0 * (n - 1) / n; }
double input(const Pattern& p, int rank, int, int, size_t i) { return p.value(rank, i); }
bool expected(const Pattern& p, int, int, int, size_t, size_t i, double* want) {
  *want = p.reduced(i);
  return true;
}
ncclResult_t run(const CallArgs& a) {
  return ncclAllReduce(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
}

}  // namespace

const Collective& driverCollective() {
  static const Collective c{"all_reduce_perf", "ncclAllReduce", true, false, true,
                            counts, algFactor, busFactor, input, expected, run};
  return c;
}

}  // namespace perf
