/* An abort reaches an operation whose data keeps moving (it never stalls long
 * enough for a wait's slow-path checks). `abort_moving allreduce|sendrecv MiB`:
 * 2 ranks of one process, a thread each, run one operation of MiB per rank
 * (allreduce: in place; sendrecv: rank 0 sends to rank 1); once both are
 * inside, the main thread aborts rank 0's communicator. Rank 0's call must
 * return an error soon after: within half of what was left of the operation
 * (its whole time, measured first on fresh communicators, less the 50 ms it
 * ran before the abort), and within 1 s. Prints
 * the times and "OK: MODE", or "SLOW: ..." when rank 0's call went on.
 * Run with ACCL_DIRECT=0 (the ring). */
#define _DEFAULT_SOURCE
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static ncclComm_t comms[2];
static size_t count;
static int sendrecv;
static float* bufs[2];
static volatile int inside;
static ncclResult_t results[2];
static double ended[2];

static void* rank(void* arg) {
  const int r = (int)(long)arg;
  __sync_fetch_and_add(&inside, 1);
  if (sendrecv)
    results[r] = r == 0 ? ncclSend(bufs[0], count, ncclFloat, 1, comms[0], NULL)
                        : ncclRecv(bufs[1], count, ncclFloat, 0, comms[1], NULL);
  else
    results[r] = ncclAllReduce(bufs[r], bufs[r], count, ncclFloat, ncclSum, comms[r], NULL);
  ended[r] = now();
  return NULL;
}

int main(int argc, char** argv) {
  CHECK(argc == 3, "usage: abort_moving allreduce|sendrecv MiB");
  sendrecv = strcmp(argv[1], "sendrecv") == 0;
  count = (size_t)atoi(argv[2]) << 18;
  for (int r = 0; r < 2; ++r) {
    bufs[r] = malloc(count * sizeof(float));
    CHECK(bufs[r], "malloc");
    memset(bufs[r], 1, count * sizeof(float)); /* touched (a zero fill may become calloc, touching nothing) */
  }
  pthread_t t[2];
  double whole = 0;
  for (int round = 0; round < 2; ++round) {  /* 0: whole, timed; 1: aborted */
    CHECK(ncclCommInitAll(comms, 2, NULL) == ncclSuccess, "ncclCommInitAll");
    inside = 0;
    const double start = now();
    for (long r = 0; r < 2; ++r) pthread_create(&t[r], NULL, rank, (void*)r);
    if (round == 0) {
      for (int r = 0; r < 2; ++r) pthread_join(t[r], NULL);
      whole = now() - start;
      CHECK(results[0] == ncclSuccess && results[1] == ncclSuccess, "the whole operation failed");
      for (int r = 0; r < 2; ++r) CHECK(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy");
      continue;
    }
    while (inside < 2) usleep(1000);
    usleep(50000); /* both moving data */
    const double t0 = now();
    CHECK(ncclCommAbort(comms[0]) == ncclSuccess, "abort");
    const double aborted = now() - t0;
    pthread_join(t[0], NULL);
    const double rank0 = ended[0] - t0;
    pthread_join(t[1], NULL);
    ncclCommAbort(comms[1]);
    printf("whole: %.3f s; aborted 50 ms in: the abort returned after %.3f s, rank 0's call after %.3f s (%d), "
           "rank 1's after %.3f s (%d)\n", whole, aborted, rank0, results[0], ended[1] - t0, results[1]);
    CHECK(results[0] != ncclSuccess, "rank 0's call on the aborted communicator succeeded");
    if (rank0 > 1 || rank0 > (whole - 0.05) / 2) {
      printf("SLOW: rank 0's call went on %.3f s after the abort\n", rank0);
      return 1;
    }
  }
  printf("OK: %s\n", argv[1]);
  return 0;
}
