// alltoall_perf: ncclAlltoAll. Rank r sends block p (count/n elements) to rank p
// and receives block r of every rank, in rank order; algbw counts the n
// blocks, busbw = algbw * (n-1)/n. In place: send and receive buffers are one.
#include "core/collective.h"

namespace perf {
namespace {

Counts counts(size_t count, int n) {
  Counts c;
  c.param = count / n;
  c.send = c.recv = c.param * n;
  return c;
}
double algFactor(int n) { return n; }
double busFactor(int n) { return double(n - 1) / n; }
double input(const Pattern& p, int rank, int, int, size_t i) { return p.value(rank, i); }
bool expected(const Pattern& p, int rank, int, int, size_t param, size_t i, double* want) {
  *want = p.value(int(i / param), size_t(rank) * param + i % param);
  return true;
}
ncclResult_t run(const CallArgs& a) {
  return ncclAlltoAll(a.send, a.recv, a.count, a.type, a.comm, a.stream);
}

}  // namespace

const Collective& driverCollective() {
  static const Collective c{"alltoall_perf", "ncclAlltoAll", false, false, true,
                            counts, algFactor, busFactor, input, expected, run};
  return c;
}

}  // namespace perf
