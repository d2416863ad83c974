/* ncclCommShrink and ncclCommRevoke, 4 ranks as threads of one process (host
 * mode). 1: rank 2 is left out of a shrink it does not call; the other three
 * get ranks 0..2 in parent order and reduce correctly. 2: an allreduce that
 * waits for peers that never come is stopped by ncclCommRevoke from another
 * thread; a revoked communicator refuses new work; ncclCommShrink with
 * NCCL_SHRINK_ABORT and no exclusions rebuilds it. 3: on a 1-rank
 * communicator, whose wait no connection ends, ncclCommRevoke from another
 * thread stops an ncclWaitSignal for a signal that never comes. Prints "OK" at
 * the end. */
#define _POSIX_C_SOURCE 200809L /* nanosleep, clock_gettime under -std=c99 */
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"

#define N 4
static ncclComm_t parent[N], shrunk[N], rebuilt[N];
static ncclResult_t blockedResult = ncclSuccess;


static float sumOf(ncclComm_t c, float mine) {
  float x = mine;
  ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, c, NULL);
  CHECK(r == ncclSuccess, "allreduce returned %d", r);
  return x;
}

static void* phase1(void* arg) {
  int rank = (int)(long)arg;
  if (rank == 2) return NULL; /* excluded: does not call */
  int excl[1] = {2};
  ncclResult_t r = ncclCommShrink(parent[rank], excl, 1, &shrunk[rank], NULL, NCCL_SHRINK_DEFAULT);
  CHECK(r == ncclSuccess, "rank %d: shrink returned %d", rank, r);
  int nr = -1, me = -1;
  ncclCommCount(shrunk[rank], &nr);
  ncclCommUserRank(shrunk[rank], &me);
  CHECK(nr == 3 && me == (rank < 2 ? rank : 2), "rank %d: shrunk to rank %d of %d", rank, me, nr);
  float s = sumOf(shrunk[rank], (float)(rank + 1));
  CHECK(s == 1 + 2 + 4, "rank %d: sum %g, want 7", rank, s);
  return NULL;
}

static void* blockedAllreduce(void* arg) {
  (void)arg;
  float x = 1;
  blockedResult = ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, shrunk[0], NULL); /* the others never call */
  return NULL;
}

static void* phase2(void* arg) {
  int rank = (int)(long)arg;
  if (rank == 2) return NULL;
  ncclResult_t r = ncclCommShrink(shrunk[rank], NULL, 0, &rebuilt[rank], NULL, NCCL_SHRINK_ABORT);
  CHECK(r == ncclSuccess, "rank %d: shrink after revoke returned %d", rank, r);
  float s = sumOf(rebuilt[rank], 10.0f * (float)rank);
  CHECK(s == 0 + 10 + 30, "rank %d: sum %g after rebuild, want 40", rank, s);
  return NULL;
}

static void runAll(void* (*fn)(void*)) {
  pthread_t t[N];
  for (long i = 0; i < N; ++i) pthread_create(&t[i], NULL, fn, (void*)i);
  for (int i = 0; i < N; ++i) pthread_join(t[i], NULL);
}

static ncclComm_t alone;
static void* revokeAlone(void* arg) {
  (void)arg;
  struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
  CHECK(ncclCommRevoke(alone, 0) == ncclSuccess, "revoke the 1-rank communicator");
  return NULL;
}

/* Phase 3: a wait for a signal that never comes, on a communicator of one rank. */
static void revokeAloneWait(void) {
  int dev = 0;
  CHECK(ncclCommInitAll(&alone, 1, &dev) == ncclSuccess, "a 1-rank communicator");
  static char buf[64];
  ncclWindow_t win;
  CHECK(ncclCommWindowRegister(alone, buf, sizeof buf, &win, 0) == ncclSuccess, "window");
  pthread_t t;
  pthread_create(&t, NULL, revokeAlone, NULL);
  ncclWaitSignalDesc_t d = {1, 0, 0, 0};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const ncclResult_t r = ncclWaitSignal(1, &d, alone, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  pthread_join(t, NULL);
  CHECK(r == ncclInvalidUsage, "the revoked 1-rank wait returned %d", r);
  CHECK(t1.tv_sec - t0.tv_sec < 10, "revoke took %lds to stop the 1-rank wait", (long)(t1.tv_sec - t0.tv_sec));
  CHECK(ncclCommDestroy(alone) == ncclSuccess, "destroy the 1-rank communicator");
}

int main(void) {
  CHECK(ncclCommInitAll(parent, N, NULL) == ncclSuccess, "ncclCommInitAll");
  runAll(phase1);

  pthread_t b;
  pthread_create(&b, NULL, blockedAllreduce, NULL);
  struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < N; ++i)
    if (i != 2) CHECK(ncclCommRevoke(shrunk[i], 0) == ncclSuccess, "revoke %d", i);
  pthread_join(b, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  CHECK(blockedResult != ncclSuccess, "the blocked allreduce returned success after revoke");
  CHECK(t1.tv_sec - t0.tv_sec < 10, "revoke took %lds to stop the allreduce", (long)(t1.tv_sec - t0.tv_sec));
  float x = 1;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, shrunk[1], NULL) == ncclInvalidUsage,
        "a revoked communicator accepted an allreduce");
  CHECK(ncclCommRevoke(shrunk[1], 5) == ncclInvalidArgument, "revokeFlags 5 accepted");
  int self[1] = {1};
  ncclComm_t none;
  CHECK(ncclCommShrink(parent[1], self, 1, &none, NULL, NCCL_SHRINK_DEFAULT) == ncclInvalidArgument,
        "a rank excluding itself was accepted");
  CHECK(ncclCommShrink(parent[1], NULL, 0, &none, NULL, 7) == ncclInvalidArgument, "shrinkFlags 7 accepted");

  runAll(phase2);
  for (int i = 0; i < N; ++i) {
    if (i != 2) {
      ncclCommDestroy(rebuilt[i]);
      ncclCommDestroy(shrunk[i]);
    }
    ncclCommDestroy(parent[i]);
  }
  revokeAloneWait();
  printf("OK\n");
  return 0;
}
