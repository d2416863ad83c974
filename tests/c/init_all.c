/* Several ranks in one process: ncclCommInitAll (devlist NULL, and one that
 * repeats a device), grouped ncclCommInitRank from one thread, a group of
 * allreduces over all of them from one thread, and a non-blocking init.
 * Prints "N passed, M failed". */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#include "one_process.h"

#define N 4

int main(void) {
  ncclComm_t comms[N];
  int devs[N] = {0, 0, 0, 0}, r, rank, count;
  ncclUniqueId id;
  ncclResult_t st;

  expect("InitAll(NULL devlist)", ncclCommInitAll(comms, N, NULL) == ncclSuccess);
  for (r = 0; r < N; ++r) {
    expect("rank", ncclCommUserRank(comms[r], &rank) == ncclSuccess && rank == r);
    expect("count", ncclCommCount(comms[r], &count) == ncclSuccess && count == N);
  }
  expect("grouped allreduce over InitAll comms", groupedAllReduce(comms, N));
  for (r = 0; r < N; ++r) expect("destroy", ncclCommDestroy(comms[r]) == ncclSuccess);

  expect("InitAll(devlist {0,0,0,0})", ncclCommInitAll(comms, N, devs) == ncclSuccess);
  expect("grouped allreduce, shared device", groupedAllReduce(comms, N));
  for (r = 0; r < N; ++r) expect("destroy", ncclCommDestroy(comms[r]) == ncclSuccess);

  expect("GetUniqueId", ncclGetUniqueId(&id) == ncclSuccess);
  expect("GroupStart", ncclGroupStart() == ncclSuccess);
  for (r = 0; r < 3; ++r) expect("grouped InitRank", ncclCommInitRank(&comms[r], 3, id, r) == ncclSuccess);
  expect("GroupEnd (runs the inits)", ncclGroupEnd() == ncclSuccess);
  expect("grouped allreduce after grouped init", groupedAllReduce(comms, 3));
  expect("nested groups", ncclGroupStart() == ncclSuccess && ncclGroupStart() == ncclSuccess &&
                              ncclGroupEnd() == ncclSuccess && ncclGroupEnd() == ncclSuccess);
  for (r = 0; r < 3; ++r) expect("finalize", ncclCommFinalize(comms[r]) == ncclSuccess);
  for (r = 0; r < 3; ++r) expect("destroy", ncclCommDestroy(comms[r]) == ncclSuccess);

  {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclComm_t c;
    int polls = 0;
    cfg.blocking = 0;
    expect("GetUniqueId", ncclGetUniqueId(&id) == ncclSuccess);
    st = ncclCommInitRankConfig(&c, 1, id, 0, &cfg);
    expect("non-blocking init returns ncclInProgress or ncclSuccess", st == ncclInProgress || st == ncclSuccess);
    do {
      if (ncclCommGetAsyncError(c, &st) != ncclSuccess) break;
      ++polls;
    } while (st == ncclInProgress && polls < 100000000);
    expect("non-blocking init completes", st == ncclSuccess);
    expect("destroy non-blocking comm", ncclCommDestroy(c) == ncclSuccess);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
