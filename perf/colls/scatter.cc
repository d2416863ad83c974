// scatter_perf: ncclScatter. The root sends block p (count/n elements) to rank
// p; algbw counts the n blocks, busbw = algbw * (n-1)/n. In place: rank r's
// output is block r of the root's input buffer.
#include "core/collective.h"

namespace perf {
namespace {

Counts counts(size_t count, int n) {
  Counts c;
  c.param = c.recv = count / n;
  c.send = c.param * n;
  c.recvInPlace = c.param;
  return c;
}
double algFactor(int n) { return n; }
double busFactor(int n) { return double(n - 1) / n; }
double input(const Pattern& p, int rank, int, int, size_t i) { return p.value(rank, i); }
bool expected(const Pattern& p, int rank, int, int root, size_t param, size_t i, double* want) {
  *want = p.value(root, size_t(rank) * param + i);
  return true;
}
ncclResult_t run(const CallArgs& a) {
  return ncclScatter(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}

}  // namespace

const Collective& driverCollective() {
  static const Collective c{"scatter_perf", "ncclScatter", false, true, true,
                            counts, algFactor, busFactor, input, expected, run};
  return c;
}

}  // namespace perf
