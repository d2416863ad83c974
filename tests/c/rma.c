/* Windows and one-sided operations (host memory): `rma threads N` runs N ranks
 * as threads of one process, `rma procs N` as N processes (rank 0 forks the
 * others first; with RMA_HOST_PER_RANK=1 each process is its own NCCL_HOSTID, so the
 * puts cross sockets). Every rank puts a block into every rank's window (its
 * own included) and a multi-slot block into the next rank's second window,
 * then waits for the signals and checks every byte; bare signals; argument
 * errors; collective deregistration; a wait that times out (ACCL_TIMEOUT must
 * be small). Prints "OK" from rank 0 at the end. `rma dead N`: processes; every
 * rank but 0 registers a window and exits, and rank 0's wait for their signals
 * must fail fast with the dead rank named, not at ACCL_TIMEOUT. `rma left N`:
 * processes; rank 1 signals rank 0, destroys its communicator and exits, the
 * others signal rank 0 half a second later: rank 0's wait for all of them
 * succeeds (a rank that left owing nothing is no failure). `rma differ N`:
 * processes; after a first window, rank 0 registers a second one while the
 * others deregister theirs, then stay 5 s before they abort: every rank's
 * call fails within 3 s (the exchanges differ in size), not at ACCL_TIMEOUT. */
#define _POSIX_C_SOURCE 200809L
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rank_test.h"

/* Declared by NCCL's device API header (nccl_device/core.h), not nccl.h. */
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);

#define MAXR 8
#define BLOCK 1000             /* floats each rank puts into each window */
#define BIG (3 * 1024 * 1024 + 5) /* bytes: several FIFO slots, an odd tail */

static ncclUniqueId id;
static int nranks;


static unsigned char bigByte(int from, size_t i) { return (unsigned char)((from * 31 + i * 7) & 0xff); }

static void* runRank(void* arg) {
  int rank = (int)(long)arg;
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, nranks, id, rank) == ncclSuccess, "init");
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;

  size_t wbytes = (size_t)nranks * BLOCK * sizeof(float);
  float* wbuf = malloc(wbytes);
  unsigned char* big = malloc(BIG);
  unsigned char* bigIn = malloc(BIG);
  for (size_t i = 0; i < (size_t)nranks * BLOCK; ++i) wbuf[i] = -1;
  memset(bigIn, 0, BIG);
  for (size_t i = 0; i < BIG; ++i) big[i] = bigByte(rank, i);
  ncclWindow_t win, win2;
  CHECK(ncclCommWindowRegister(comm, wbuf, wbytes, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, "register");
  CHECK(ncclCommWindowRegister(comm, bigIn, BIG, &win2, NCCL_WIN_DEFAULT) == ncclSuccess, "register 2");
  void* user = NULL;
  CHECK(ncclWinGetUserPtr(comm, win, &user) == ncclSuccess && user == wbuf, "ncclWinGetUserPtr");
  void* peerPtr = wbuf;  /* host windows: no device pointer to any peer (NULL, as NCCL for unreachable ones) */
  CHECK(ncclGetPeerDevicePointer(win, 0, next, &peerPtr) == ncclSuccess && peerPtr == NULL, "ncclGetPeerDevicePointer");
  CHECK(ncclGetPeerDevicePointer(win, 0, nranks, &peerPtr) == ncclInvalidArgument, "ncclGetPeerDevicePointer peer");
  CHECK(ncclGetPeerDevicePointer(win, wbytes + 1, rank, &peerPtr) == ncclInvalidArgument,
        "ncclGetPeerDevicePointer offset");
  CHECK(ncclGetPeerDevicePointer(NULL, 0, 0, &peerPtr) == ncclInvalidArgument, "ncclGetPeerDevicePointer NULL");

  /* Every rank's block into every window, at its own offset; the big one to the next rank. */
  float block[BLOCK];
  for (int i = 0; i < BLOCK; ++i) block[i] = (float)(rank * 1000 + i);
  for (int p = 0; p < nranks; ++p) {
    int to = (rank + p) % nranks; /* start with another rank than everyone else */
    CHECK(ncclPutSignal(block, BLOCK, ncclFloat32, to, win, (size_t)rank * BLOCK * sizeof(float), 0, 0, 0, comm,
                        NULL) == ncclSuccess, "put to %d", to);
  }
  CHECK(ncclPutSignal(big, BIG, ncclUint8, next, win2, 0, 0, 0, 0, comm, NULL) == ncclSuccess, "big put");
  ncclWaitSignalDesc_t d[MAXR];
  for (int p = 0; p < nranks; ++p) {
    d[p].opCnt = 1 + (p == prev);
    d[p].peer = p;
    d[p].sigIdx = 0;
    d[p].ctx = 0;
  }
  CHECK(ncclWaitSignal(nranks, d, comm, NULL) == ncclSuccess, "wait");
  for (int q = 0; q < nranks; ++q)
    for (int i = 0; i < BLOCK; ++i)
      CHECK(wbuf[q * BLOCK + i] == (float)(q * 1000 + i), "window[%d][%d] = %g", q, i, wbuf[q * BLOCK + i]);
  for (size_t i = 0; i < BIG; ++i) CHECK(bigIn[i] == bigByte(prev, i), "big byte %zu from %d", i, prev);

  /* Bare signals around the ring, twice, then one wait for both. */
  CHECK(ncclSignal(next, 0, 0, 0, comm, NULL) == ncclSuccess, "signal");
  CHECK(ncclSignal(next, 0, 0, 0, comm, NULL) == ncclSuccess, "signal");
  ncclWaitSignalDesc_t two = {2, prev, 0, 0};
  CHECK(ncclWaitSignal(1, &two, comm, NULL) == ncclSuccess, "wait for 2 signals");

  /* Bad arguments: a clear error, nothing sent. */
  CHECK(ncclPutSignal(block, BLOCK, ncclFloat32, next, win, wbytes - 4, 0, 0, 0, comm, NULL) == ncclInvalidArgument,
        "a put past the window's end was accepted");
  CHECK(ncclPutSignal(block, 1, ncclFloat32, next, win, 0, 1, 0, 0, comm, NULL) == ncclInvalidArgument,
        "sigIdx 1 accepted");
  CHECK(ncclPutSignal(block, 1, ncclFloat32, nranks, win, 0, 0, 0, 0, comm, NULL) == ncclInvalidArgument,
        "peer nranks accepted");
  CHECK(ncclPutSignal(block, 1, ncclFloat32, next, (ncclWindow_t)block, 0, 0, 0, 0, comm, NULL) ==
            ncclInvalidArgument, "a bogus window accepted");
  CHECK(ncclSignal(next, 0, 0, 1, comm, NULL) == ncclInvalidArgument, "flags 1 accepted");
  ncclWaitSignalDesc_t bad = {1, -1, 0, 0};
  CHECK(ncclWaitSignal(1, &bad, comm, NULL) == ncclInvalidArgument, "peer -1 accepted");
  CHECK(ncclGroupStart() == ncclSuccess, "group start");
  CHECK(ncclSignal(next, 0, 0, 0, comm, NULL) == ncclInvalidUsage, "a signal inside a group accepted");
  CHECK(ncclGroupEnd() == ncclSuccess, "group end");

  /* Deregistration is collective; collectives go on afterwards. */
  CHECK(ncclCommWindowDeregister(comm, win2) == ncclSuccess, "deregister 2");
  CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess, "deregister");
  float x = (float)rank;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) == ncclSuccess, "allreduce");
  CHECK(x == (float)(nranks * (nranks - 1) / 2), "allreduce %g", x);

  /* A signal that never comes: ncclTimeout after ACCL_TIMEOUT, or ncclRemoteError
   * if a peer's wait timed out first (a timeout fails that rank's communicator,
   * and its peers learn of it; on a slow machine the ranks' deadlines spread). */
  ncclWaitSignalDesc_t never = {1, rank, 0, 0};
  ncclResult_t timedOut = ncclWaitSignal(1, &never, comm, NULL);
  CHECK(timedOut == ncclTimeout || timedOut == ncclRemoteError, "a wait for a signal nobody sends returned %d",
        timedOut);
  ncclCommDestroy(comm);
  free(wbuf);
  free(big);
  free(bigIn);
  return NULL;
}

/* Rank `rank`'s communicator, with a 4 KiB window registered in *win. */
static ncclComm_t withWindow(int rank, ncclWindow_t* win) {
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, nranks, id, rank) == ncclSuccess, "init");
  static char buf[4096];
  CHECK(ncclCommWindowRegister(comm, buf, sizeof buf, win, NCCL_WIN_DEFAULT) == ncclSuccess, "register");
  return comm;
}

/* `rma dead`: the ranks other than 0 leave without a word. */
static void* deadPeer(void* arg) {
  int rank = (int)(long)arg;
  ncclWindow_t win;
  ncclComm_t comm = withWindow(rank, &win);
  if (rank != 0) {
    fflush(stdout);
    _exit(0); /* no signal, no destroy */
  }
  ncclWaitSignalDesc_t d = {1, 1, 0, 0};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ncclResult_t r = ncclWaitSignal(1, &d, comm, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  CHECK(r == ncclRemoteError, "a wait for a dead rank returned %d", r);
  CHECK(t1.tv_sec - t0.tv_sec < 10, "the wait took %ld s to see the dead rank", (long)(t1.tv_sec - t0.tv_sec));
  ncclCommAbort(comm);
  printf("OK: dead peer seen after %.2f s\n", (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
  return NULL;
}

/* `rma left`: rank 1 signals rank 0 and leaves; the others signal later. */
static void* leftEarly(void* arg) {
  int rank = (int)(long)arg;
  ncclWindow_t win;
  ncclComm_t comm = withWindow(rank, &win);
  if (rank == 1) {
    CHECK(ncclSignal(0, 0, 0, 0, comm, NULL) == ncclSuccess, "signal");
    CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
    fflush(stdout);
    _exit(0);
  }
  if (rank != 0) {
    struct timespec later = {0, 500 * 1000 * 1000};
    nanosleep(&later, NULL);
    CHECK(ncclSignal(0, 0, 0, 0, comm, NULL) == ncclSuccess, "signal");
  } else {
    ncclWaitSignalDesc_t d[MAXR];
    for (int q = 1; q < nranks; ++q) d[q - 1] = (ncclWaitSignalDesc_t){1, q, 0, 0};
    ncclResult_t r = ncclWaitSignal(nranks - 1, d, comm, NULL);
    CHECK(r == ncclSuccess, "the wait with rank 1 gone returned %d", r);
  }
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  return NULL;
}

/* `rma differ`: rank 0 registers while the others deregister. */
static void* differingCalls(void* arg) {
  int rank = (int)(long)arg;
  ncclWindow_t win, second;
  ncclComm_t comm = withWindow(rank, &win);
  static char more[4096];
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ncclResult_t r = rank == 0 ? ncclCommWindowRegister(comm, more, sizeof more, &second, NCCL_WIN_DEFAULT)
                             : ncclCommWindowDeregister(comm, win);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  CHECK(r == ncclInvalidUsage || r == ncclRemoteError, "the differing window call returned %d", r);
  CHECK(t1.tv_sec - t0.tv_sec < 3, "the differing window call took %ld s", (long)(t1.tv_sec - t0.tv_sec));
  if (rank != 0) sleep(5); /* alive, its communicator not aborted: rank 0 must not wait for that */
  ncclCommAbort(comm);
  return NULL;
}

/* A process rank: its own "host" when asked, then the id from rank 0 through a pipe. */
static void setHost(int rank) {
  if (!getenv("RMA_HOST_PER_RANK")) return;
  char host[32];
  snprintf(host, sizeof host, "rma-host-%d", rank);
  setenv("NCCL_HOSTID", host, 1); /* before the library reads its parameters */
}

int main(int argc, char** argv) {
  int rank = 0;
  CHECK(argc == 3 && atoi(argv[2]) >= 1 && atoi(argv[2]) <= MAXR, "usage: rma threads|procs N (N <= %d)", MAXR);
  nranks = atoi(argv[2]);
  if (strcmp(argv[1], "threads") == 0) {
    CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
    pthread_t t[MAXR];
    for (long r = 0; r < nranks; ++r) pthread_create(&t[r], NULL, runRank, (void*)r);
    for (int r = 0; r < nranks; ++r) pthread_join(t[r], NULL);
  } else {
    void* (*body)(void*) = strcmp(argv[1], "dead") == 0     ? deadPeer
                           : strcmp(argv[1], "differ") == 0 ? differingCalls
                           : strcmp(argv[1], "left") == 0   ? leftEarly
                                                            : runRank;
    /* Forks before any NCCL call, so that each process reads its own NCCL_HOSTID. */
    CHECK(forkRanks(nranks, &id, body, setHost) == 0, "a rank failed");
  }
  printf("OK: %d ranks\n", nranks);
  return 0;
}
