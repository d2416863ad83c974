/* Calls that need threads, at a thread limit: the test runs this as an
 * unprivileged user, and it lowers its own RLIMIT_NPROC to the threads it has
 * once 4 ranks of one process are up. Then a group over those ranks still
 * runs, on the pool's idle threads; a grouped init of 8 ranks from one
 * thread, which needs more threads, fails with ncclSystemError and runs none
 * of its inits; the 4 ranks still work after that; a non-blocking init whose
 * thread cannot start fails through ncclCommGetAsyncError. Prints
 * "N passed, M failed". */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "one_process.h"

#define N 4
#define BIG 8

static long threadsNow(void) {
  char line[256];
  long n = -1;
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  while (fgets(line, sizeof(line), f))
    if (strncmp(line, "Threads:", 8) == 0) n = atol(line + 8);
  fclose(f);
  return n;
}

int main(void) {
  ncclComm_t comms[N], big[BIG], one;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclUniqueId id, bigId;
  struct rlimit lim;
  ncclResult_t st;
  int32_t x = 3;
  int r;

  expect("InitAll of 4 ranks", ncclCommInitAll(comms, N, NULL) == ncclSuccess);
  expect("grouped allreduce before the limit", groupedAllReduce(comms, N));
  /* The ids first: each starts a bootstrap root thread. */
  expect("GetUniqueId (8 ranks)", ncclGetUniqueId(&bigId) == ncclSuccess);
  expect("GetUniqueId (1 rank)", ncclGetUniqueId(&id) == ncclSuccess);
  lim.rlim_cur = lim.rlim_max = (rlim_t)threadsNow();
  expect("setrlimit(RLIMIT_NPROC)", threadsNow() > 0 && setrlimit(RLIMIT_NPROC, &lim) == 0);
  printf("limit: %ld threads\n", (long)lim.rlim_cur);

  expect("grouped allreduce at the limit (idle threads)", groupedAllReduce(comms, N));
  expect("grouped allreduce at the limit, again", groupedAllReduce(comms, N));
  expect("GroupStart", ncclGroupStart() == ncclSuccess);
  for (r = 0; r < BIG; ++r) expect("grouped InitRank", ncclCommInitRank(&big[r], BIG, bigId, r) == ncclSuccess);
  st = ncclGroupEnd();
  expect("a group of 8 inits at the limit fails with ncclSystemError", st == ncclSystemError);
  for (r = 0; r < BIG; ++r)
    expect("its communicators failed", ncclCommGetAsyncError(big[r], &st) == ncclSuccess && st == ncclSystemError);
  for (r = 0; r < BIG; ++r) expect("destroy", ncclCommDestroy(big[r]) == ncclSuccess);
  expect("grouped allreduce after the failed inits", groupedAllReduce(comms, N));

  config.blocking = 0;
  st = ncclCommInitRankConfig(&one, 1, id, 0, &config);
  expect("non-blocking init without a thread is in progress", st == ncclInProgress);
  if (st == ncclInProgress) {
    expect("its async error is ncclSystemError", ncclCommGetAsyncError(one, &st) == ncclSuccess && st == ncclSystemError);
    expect("a call on it fails", ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, one, NULL) == ncclSystemError);
    expect("abort it", ncclCommAbort(one) == ncclSuccess);
  }
  for (r = 0; r < N; ++r) expect("destroy", ncclCommDestroy(comms[r]) == ncclSuccess);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
