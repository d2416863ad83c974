// broadcast_perf: ncclBroadcast. The root's count elements reach every rank;
// busbw = algbw.
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
bool expected(const Pattern& p, int, int, int root, size_t, size_t i, double* want) {
  *want = p.value(root, i);
  return true;
}
ncclResult_t run(const CallArgs& a) {
  return ncclBroadcast(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}

}  // namespace

const Collective& driverCollective() {
  static const Collective c{"broadcast_perf", "ncclBroadcast", false, true, true,
                            counts, algFactor, busFactor, input, expected, run};
  return c;
}

}  // namespace perf
