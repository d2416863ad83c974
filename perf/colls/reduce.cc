// reduce_perf: ncclReduce. The root ends with the reduction of all ranks'
// count elements (other ranks' output is undefined and not checked); busbw = algbw.
#include "core/collective.h"

namespace perf {
namespace {

Counts counts(size_t count, int) {
  Counts c;
  c.send = c.recv = c.param = count;
  return c;
}
double algFactor(int) { return 1; }
double busFactor(int) { return 1; }
double input(const Pattern& p, int rank, int, int, size_t i) { return p.value(rank, i); }
bool expected(const Pattern& p, int rank, int, int root, size_t, size_t i, double* want) {
  if (rank != root) return false;
  *want = p.reduced(i);
  return true;
}
ncclResult_t run(const CallArgs& a) {
  return ncclReduce(a.send, a.recv, a.count, a.type, a.op, a.root, a.comm, a.stream);
}

}  // namespace

const Collective& driverCollective() {
  static const Collective c{"reduce_perf", "ncclReduce", true, true, true,
                            counts, algFactor, busFactor, input, expected, run};
  return c;
}

}  // namespace perf
