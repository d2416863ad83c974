/* ncclCommGrow, ncclCommSuspend/Resume and ncclCommMemStats, ranks as threads
 * of one process (host mode). Two ranks grow their communicator to four: rank
 * 0 makes the id with ncclCommGetUniqueId and passes it, rank 1 passes NULL,
 * the joining ranks 2 and 3 pass comm NULL and their new rank; everyone keeps
 * or gets the right rank and reduces correctly, and the old communicator still
 * works. Then a suspended communicator refuses work until it is resumed, and
 * its statistics say so. Argument errors along the way. Prints "OK". */
#define _POSIX_C_SOURCE 200809L
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define OLD 2
#define N 4
static ncclComm_t oldComm[OLD], grown[N];
static ncclUniqueId gid;
static pthread_barrier_t idReady;


static float sumOf(ncclComm_t c, float mine) {
  float x = mine;
  ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, c, NULL);
  CHECK(r == ncclSuccess, "allreduce returned %d", r);
  return x;
}

static void* growRank(void* arg) {
  int rank = (int)(long)arg;
  if (rank < OLD) {
    if (rank == 0) CHECK(ncclCommGetUniqueId(oldComm[0], &gid) == ncclSuccess, "ncclCommGetUniqueId");
    pthread_barrier_wait(&idReady);
    ncclComm_t none;
    CHECK(ncclCommGrow(oldComm[rank], OLD, &gid, -1, &none, NULL) == ncclInvalidArgument, "grow to the same size");
    CHECK(ncclCommGrow(oldComm[rank], N, &gid, rank, &none, NULL) == ncclInvalidArgument, "existing rank not -1");
    CHECK(ncclCommGrow(oldComm[rank], N, &gid, -1, NULL, NULL) == ncclInvalidArgument, "newcomm NULL");
    ncclResult_t r = ncclCommGrow(oldComm[rank], N, rank == 0 ? &gid : NULL, -1, &grown[rank], NULL);
    CHECK(r == ncclSuccess, "rank %d: grow returned %d", rank, r);
  } else {
    pthread_barrier_wait(&idReady);
    ncclComm_t none;
    CHECK(ncclCommGrow(NULL, N, NULL, rank, &none, NULL) == ncclInvalidArgument, "joining without the id");
    CHECK(ncclCommGrow(NULL, N, &gid, N, &none, NULL) == ncclInvalidArgument, "joining rank out of range");
    ncclResult_t r = ncclCommGrow(NULL, N, &gid, rank, &grown[rank], NULL);
    CHECK(r == ncclSuccess, "rank %d: grow (joining) returned %d", rank, r);
  }
  int nr = -1, me = -1;
  ncclCommCount(grown[rank], &nr);
  ncclCommUserRank(grown[rank], &me);
  CHECK(nr == N && me == rank, "rank %d: grown to rank %d of %d", rank, me, nr);
  float s = sumOf(grown[rank], (float)(rank + 1));
  CHECK(s == 1 + 2 + 3 + 4, "rank %d: sum %g, want 10", rank, s);
  if (rank < OLD) CHECK(sumOf(oldComm[rank], (float)(rank + 1)) == 3, "rank %d: the old communicator", rank);
  return NULL;
}

static void* suspendRank(void* arg) {
  int rank = (int)(long)arg;
  ncclComm_t c = grown[rank];
  uint64_t v = 99;
  CHECK(ncclCommMemStats(c, ncclStatGpuMemSuspended, &v) == ncclSuccess && v == 0, "not suspended yet: %llu",
        (unsigned long long)v);
  CHECK(ncclCommSuspend(c, 0x4) == ncclInvalidArgument, "unknown suspend flags");
  CHECK(ncclCommResume(c) == ncclInvalidUsage, "resume while not suspended");
  CHECK(ncclCommSuspend(c, NCCL_SUSPEND_MEM) == ncclSuccess, "suspend");
  CHECK(ncclCommMemStats(c, ncclStatGpuMemSuspended, &v) == ncclSuccess && v == 1, "suspended: %llu",
        (unsigned long long)v);
  float x = 1;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, c, NULL) == ncclInvalidUsage, "allreduce while suspended");
  CHECK(ncclCommSuspend(c, 0) == ncclInvalidUsage, "suspend twice");
  CHECK(ncclCommResume(c) == ncclSuccess, "resume");
  CHECK(ncclCommMemStats(c, ncclStatGpuMemSuspended, &v) == ncclSuccess && v == 0, "resumed");
  /* Suspend frees nothing (docs/api-status.md); host mode holds no device
   * memory, device mode at least the ring's connectors. */
  int dev = -1;
  ncclCommCuDevice(c, &dev);
  CHECK(ncclCommMemStats(c, ncclStatGpuMemSuspend, &v) == ncclSuccess && v == 0, "freeable bytes");
  CHECK(ncclCommMemStats(c, ncclStatGpuMemTotal, &v) == ncclSuccess && (dev < 0 ? v == 0 : v > 0),
        "total bytes %llu on device %d", (unsigned long long)v, dev);
  CHECK(ncclCommMemStats(c, (ncclCommMemStat_t)9, &v) == ncclInvalidArgument, "unknown stat");
  CHECK(ncclCommMemStats(c, ncclStatGpuMemTotal, NULL) == ncclInvalidArgument, "NULL value");
  CHECK(sumOf(c, (float)(rank + 1)) == 10, "rank %d: allreduce after resume", rank);
  return NULL;
}

static void* initOld(void* arg) {
  int rank = (int)(long)arg;
  CHECK(ncclCommInitRank(&oldComm[rank], OLD, gid, rank) == ncclSuccess, "init rank %d", rank);
  return NULL;
}

static void runAll(void* (*fn)(void*), int n) {
  pthread_t t[N];
  for (long r = 0; r < n; ++r) pthread_create(&t[r], NULL, fn, (void*)r);
  for (int r = 0; r < n; ++r) pthread_join(t[r], NULL);
}

int main(void) {
  CHECK(ncclGetUniqueId(&gid) == ncclSuccess, "ncclGetUniqueId");
  runAll(initOld, OLD);
  pthread_barrier_init(&idReady, NULL, N);
  runAll(growRank, N);
  runAll(suspendRank, N);
  { /* one thread: ncclGetLastError is the process's last WARN */
    float x = 1;
    CHECK(ncclCommSuspend(grown[0], 0) == ncclSuccess, "suspend");
    CHECK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, grown[0], NULL) == ncclInvalidUsage, "suspended");
    CHECK(strstr(ncclGetLastError(NULL), "suspended") != NULL, "the WARN says why: %s", ncclGetLastError(NULL));
    CHECK(ncclCommResume(grown[0]) == ncclSuccess, "resume");
  }
  for (int r = 0; r < N; ++r) CHECK(ncclCommDestroy(grown[r]) == ncclSuccess, "destroy grown %d", r);
  for (int r = 0; r < OLD; ++r) CHECK(ncclCommDestroy(oldComm[r]) == ncclSuccess, "destroy old %d", r);
  printf("OK\n");
  return 0;
}
