// sendrecv_perf: ncclSend to rank+1 and ncclRecv from rank-1 in one group;
// busbw = algbw. As in nccl-tests, in-place results (one buffer for both) are
// not checked.
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
bool expected(const Pattern& p, int rank, int n, int, size_t, size_t i, double* want) {
  *want = p.value((rank - 1 + n) % n, i);
  return true;
}
ncclResult_t run(const CallArgs& a) {
  int n = 0, rank = 0;
  ncclResult_t r = ncclCommCount(a.comm, &n);
  if (r == ncclSuccess) r = ncclCommUserRank(a.comm, &rank);
  if (r != ncclSuccess) return r;
  if ((r = ncclGroupStart()) != ncclSuccess) return r;
  ncclResult_t first = ncclSend(a.send, a.count, a.type, (rank + 1) % n, a.comm, a.stream);
  ncclResult_t second = ncclRecv(a.recv, a.count, a.type, (rank - 1 + n) % n, a.comm, a.stream);
  ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess ? first : second != ncclSuccess ? second : end;
}

}  // namespace

const Collective& driverCollective() {
  static const Collective c{"sendrecv_perf", "ncclSend/ncclRecv", false, false, false,
                            counts, algFactor, busFactor, input, expected, run};
  return c;
}

}  // namespace perf
