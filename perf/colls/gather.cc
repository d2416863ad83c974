// gather_perf: ncclGather. Each rank sends count/n elements; the root ends
// with all n blocks in rank order (other ranks' output is not checked); algbw
// counts the n blocks, busbw = algbw * (n-1)/n. In place: rank r's block sits at r.
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
bool expected(const Pattern& p, int rank, int, int root, size_t param, size_t i, double* want) {
  if (rank != root) return false;
  *want = p.value(int(i / param), i % param);
  return true;
}
ncclResult_t run(const CallArgs& a) {
  return ncclGather(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}

}  // namespace

const Collective& driverCollective() {
  static const Collective c{"gather_perf", "ncclGather", false, true, true,
                            counts, algFactor, busFactor, input, expected, run};
  return c;
}

}  // namespace perf
