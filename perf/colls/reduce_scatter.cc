// reduce_scatter_perf: ncclReduceScatter. Each rank sends n blocks of count/n
// elements and ends with the reduction of block `rank`; algbw counts the n
// blocks, busbw = algbw * (n-1)/n. In place: the output is block `rank` of the input.
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
bool expected(const Pattern& p, int rank, int, int, size_t param, size_t i, double* want) {
  *want = p.reduced(size_t(rank) * param + i);
  return true;
}
ncclResult_t run(const CallArgs& a) {
  return ncclReduceScatter(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
}

}  // namespace

const Collective& driverCollective() {
  static const Collective c{"reduce_scatter_perf", "ncclReduceScatter", true, false, true,
                            counts, algFactor, busFactor, input, expected, run};
  return c;
}

}  // namespace perf
