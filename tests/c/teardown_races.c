/* Communicators torn down while something still uses them.
 * `teardown_races MODE`:
 *   blocking  a thread runs a blocking ncclCommInitRank of rank 0 of 2 (rank 1
 *             never comes); the main thread aborts the communicator as soon as
 *             the init has handed it out: the abort returns at once and the
 *             init fails, with nothing freed twice or used after its free
 *   group     ncclCommInitRank of rank 0 of 2 queued in a group, aborted before
 *             ncclGroupEnd, which must not run the init on the freed
 *             communicator and fails
 *   destroy   2 ranks of one process; rank 0's thread runs an allreduce that
 *             rank 1 never joins, and the main thread destroys rank 0's
 *             communicator under it: the allreduce fails at once and the
 *             communicator is freed only after it left
 * Run under valgrind (tests/native/test_memcheck.py) a use after free shows.
 * Prints "OK: MODE". */
#define _DEFAULT_SOURCE
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static ncclUniqueId id;
static ncclComm_t volatile handed; /* the blocking init's communicator, once handed out */
static ncclResult_t initResult;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static ncclComm_t pair[2];
static ncclResult_t callResult = ncclSuccess;
static void* lonelyAllreduce(void* arg) {
  (void)arg;
  static float x[4];
  callResult = ncclAllReduce(x, x, 4, ncclFloat, ncclSum, pair[0], NULL);
  return NULL;
}

static void* blockingInit(void* arg) {
  (void)arg;
  initResult = ncclCommInitRank((ncclComm_t*)&handed, 2, id, 0);
  return NULL;
}

int main(int argc, char** argv) {
  CHECK(argc == 2, "usage: teardown_races blocking|group|destroy");
  CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
  if (strcmp(argv[1], "blocking") == 0) {
    pthread_t t;
    pthread_create(&t, NULL, blockingInit, NULL);
    while (!handed) usleep(1000);
    usleep(200 * 1000); /* inside the init, waiting for rank 1 */
    const double t0 = now();
    CHECK(ncclCommAbort(handed) == ncclSuccess, "abort");
    const double took = now() - t0;
    pthread_join(t, NULL);
    CHECK(took < 5, "the abort took %.1f s", took);
    CHECK(initResult != ncclSuccess && initResult != ncclInProgress, "the aborted init returned %d", initResult);
  } else if (strcmp(argv[1], "destroy") == 0) {
    CHECK(ncclCommInitAll(pair, 2, NULL) == ncclSuccess, "ncclCommInitAll");
    pthread_t t;
    pthread_create(&t, NULL, lonelyAllreduce, NULL);
    usleep(300 * 1000); /* the allreduce waits for rank 1 */
    const double t0 = now();
    CHECK(ncclCommDestroy(pair[0]) == ncclSuccess, "destroy under the allreduce");
    pthread_join(t, NULL);
    const double took = now() - t0;
    CHECK(took < 5, "the destroy and the allreduce took %.1f s", took);
    CHECK(callResult != ncclSuccess, "the allreduce of the destroyed communicator succeeded");
    CHECK(ncclCommDestroy(pair[1]) == ncclSuccess, "destroy rank 1");
  } else {
    ncclComm_t comm = NULL;
    CHECK(ncclGroupStart() == ncclSuccess, "group start");
    CHECK(ncclCommInitRank(&comm, 2, id, 0) == ncclSuccess && comm, "queued init");
    CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
    const ncclResult_t r = ncclGroupEnd();
    CHECK(r != ncclSuccess && r != ncclInProgress, "the group of the aborted init returned %d", r);
  }
  printf("OK: %s\n", argv[1]);
  return 0;
}
