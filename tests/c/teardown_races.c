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
 *   queued    an allreduce queued in the main thread's group, and another
 *             thread destroys the communicator before ncclGroupEnd, which
 *             fails instead of running it on freed memory
 *   calls N   N times: a thread calls a 1-rank communicator without pause
 *             (allreduce, count, async error) while the main thread aborts
 *             it; every call succeeds or says the handle is not live, and
 *             none uses the communicator after its free
 *   window    handles of a deregistered window (and of a destroyed
 *             communicator's) are refused with ncclInvalidArgument, and
 *             nothing reads through them
 * Run under valgrind (tests/native/test_memcheck.py) a use after free shows.
 * Prints "OK: MODE". */
#define _DEFAULT_SOURCE
#include <nccl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* In NCCL's device API header, which ACCL does not install. */
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);

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

static ncclComm_t volatile busy;
static volatile int calling;
static void* callUntilGone(void* arg) {
  (void)arg;
  static float x[16];
  int n;
  ncclResult_t e;
  calling = 1;
  for (;;) {
    ncclResult_t r[3] = {ncclAllReduce(x, x, 16, ncclFloat, ncclSum, busy, NULL), ncclCommCount(busy, &n),
                         ncclCommGetAsyncError(busy, &e)};
    for (int i = 0; i < 3; ++i) {
      if (r[i] == ncclInvalidArgument) return NULL; /* gone */
      /* an allreduce the abort reached fails otherwise */
      if (r[i] != ncclSuccess && !(i == 0 && r[i] != ncclInternalError)) {
        callResult = r[i];
        return NULL;
      }
    }
  }
}

static void* destroyRank0(void* arg) {
  (void)arg;
  callResult = ncclCommDestroy(pair[0]);
  return NULL;
}

/* A stale window handle is refused by every call that takes one. */
static void checkStale(ncclComm_t comm, ncclWindow_t win, const char* what) {
  void* p = &p;
  static float x[1];
  CHECK(ncclWinGetUserPtr(comm, win, &p) == ncclInvalidArgument, "ncclWinGetUserPtr on %s", what);
  CHECK(ncclGetPeerDevicePointer(win, 0, 0, &p) == ncclInvalidArgument, "ncclGetPeerDevicePointer on %s", what);
  CHECK(ncclPutSignal(x, 1, ncclFloat, 0, win, 0, 0, 0, 0, comm, NULL) == ncclInvalidArgument,
        "ncclPutSignal on %s", what);
}

static void* blockingInit(void* arg) {
  (void)arg;
  initResult = ncclCommInitRank((ncclComm_t*)&handed, 2, id, 0);
  return NULL;
}

int main(int argc, char** argv) {
  CHECK(argc >= 2, "usage: teardown_races blocking|group|destroy|queued|window|calls [ROUNDS]");
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
  } else if (strcmp(argv[1], "queued") == 0) {
    static float x[4];
    CHECK(ncclCommInitAll(pair, 2, NULL) == ncclSuccess, "ncclCommInitAll");
    CHECK(ncclGroupStart() == ncclSuccess, "group start");
    CHECK(ncclAllReduce(x, x, 4, ncclFloat, ncclSum, pair[0], NULL) == ncclSuccess, "queued allreduce");
    pthread_t t;
    pthread_create(&t, NULL, destroyRank0, NULL);
    pthread_join(t, NULL);
    CHECK(callResult == ncclSuccess, "the other thread's destroy returned %d", callResult);
    const ncclResult_t r = ncclGroupEnd();
    CHECK(r == ncclInvalidUsage, "the group of the destroyed communicator returned %d", r);
    CHECK(ncclCommDestroy(pair[1]) == ncclSuccess, "destroy rank 1");
  } else if (strcmp(argv[1], "calls") == 0) {
    const int rounds = argc > 2 ? atoi(argv[2]) : 100;
    for (int i = 0; i < rounds; ++i) {
      ncclComm_t c;
      int dev = 0;
      CHECK(ncclCommInitAll(&c, 1, &dev) == ncclSuccess, "ncclCommInitAll");
      busy = c;
      calling = 0;
      pthread_t t;
      pthread_create(&t, NULL, callUntilGone, NULL);
      while (!calling) sched_yield();
      usleep((useconds_t)(i % 7) * 50);
      CHECK(ncclCommAbort(c) == ncclSuccess, "abort in round %d", i);
      pthread_join(t, NULL);
      CHECK(callResult == ncclSuccess, "round %d: a call on the aborted communicator returned %d", i, callResult);
    }
  } else if (strcmp(argv[1], "window") == 0) {
    static float buf[64];
    ncclComm_t comm;
    ncclWindow_t win, kept;
    int dev = 0;
    CHECK(ncclCommInitAll(&comm, 1, &dev) == ncclSuccess, "ncclCommInitAll");
    CHECK(ncclCommWindowRegister(comm, buf, sizeof buf, &win, NCCL_WIN_DEFAULT) == ncclSuccess, "register");
    CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess, "deregister");
    checkStale(comm, win, "a deregistered window");
    CHECK(ncclCommWindowDeregister(comm, win) == ncclInvalidArgument, "a second deregistration");
    CHECK(ncclCommWindowRegister(comm, buf, sizeof buf, &kept, NCCL_WIN_DEFAULT) == ncclSuccess, "register");
    CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
    void* p;
    CHECK(ncclGetPeerDevicePointer(kept, 0, 0, &p) == ncclInvalidArgument,
          "ncclGetPeerDevicePointer on a destroyed communicator's window");
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
