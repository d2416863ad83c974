/* Sockets send straight from the caller's buffers (coll/steps.h, postFrom).
 * Two processes, each its own NCCL_HOSTID, so every byte goes over a socket
 * (`sent_from_memory shm`: one host, shared memory, the same checks):
 *   1. allreduce (the exchange) and a send/receive pair, out of place and in
 *      place, 16 MiB of integers whose sums are checked exactly; then the
 *      inputs are overwritten at once and the results of a second round must
 *      not see it (no frame was still reading them); a send and a receive of
 *      one group on the same 16 MiB buffer must send what it held before
 *      (the receive overwrites it meanwhile);
 *   2. rank 1 stops reading (it sleeps, then aborts without joining) while
 *      rank 0's 64 MiB allreduce has frames queued from its input: the call
 *      times out (rank 0's ACCL_TIMEOUT is 2 s) within a second of its
 *      deadline, and rank 0 unmaps the input, runs on 300 ms and aborts,
 *      with nothing hanging. (A connection that still sent from the
 *      unmapped input would not crash: the kernel fails such a send with
 *      EFAULT. Connection::abandonFrom is what rules it out.)
 * Prints "OK: rank R" from each rank. */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "rank_test.h"

static ncclUniqueId id;
enum { kCount = 4 << 20 };                    /* 16 MiB of int32 */
enum { kBigBytes = 64 << 20 };

static int sockets = 1;

static void setHost(int rank) {
  char host[32];
  snprintf(host, sizeof(host), "host%d", rank);
  if (sockets) setenv("NCCL_HOSTID", host, 1);
  if (rank == 0) setenv("ACCL_TIMEOUT", "2", 1);
}

static int32_t* ints(size_t n) {
  int32_t* p = malloc(n * sizeof(int32_t));
  if (!p) exit(3);
  return p;
}

static void fill(int32_t* x, int rank, int round) {
  for (size_t i = 0; i < kCount; ++i) x[i] = (int32_t)(i * 7 + rank * 1000003 + round);
}

static void* body(void* arg) {
  const int rank = (int)(long)arg, peer = 1 - rank;
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, 2, id, rank) == ncclSuccess, "init");
  int32_t *in = ints(kCount), *out = ints(kCount), *inplace = ints(kCount);
  for (int round = 0; round < 2; ++round) {
    fill(in, rank, round);
    fill(inplace, rank, round);
    CHECK(ncclAllReduce(in, out, kCount, ncclInt32, ncclSum, comm, NULL) == ncclSuccess, "allreduce");
    CHECK(ncclAllReduce(inplace, inplace, kCount, ncclInt32, ncclSum, comm, NULL) == ncclSuccess, "in place");
    memset(in, 0xff, kCount * sizeof(int32_t)); /* the caller's again: nothing may still send from it */
    for (size_t i = 0; i < kCount; ++i) {
      const int32_t want = (int32_t)(2 * (i * 7 + round) + 1000003);
      CHECK(out[i] == want && inplace[i] == want, "round %d element %zu: %d and %d, want %d", round, i, out[i],
            inplace[i], want);
    }
    fill(in, rank, round);
    CHECK(ncclGroupStart() == ncclSuccess && ncclSend(in, kCount, ncclInt32, peer, comm, NULL) == ncclSuccess &&
              ncclRecv(out, kCount, ncclInt32, peer, comm, NULL) == ncclSuccess && ncclGroupEnd() == ncclSuccess,
          "send/receive");
    memset(in, 0xff, kCount * sizeof(int32_t));
    for (size_t i = 0; i < kCount; ++i)
      CHECK(out[i] == (int32_t)(i * 7 + peer * 1000003 + round), "received element %zu: %d", i, out[i]);
    fill(inplace, rank, round);
    CHECK(ncclGroupStart() == ncclSuccess &&
              ncclSend(inplace, kCount, ncclInt32, peer, comm, NULL) == ncclSuccess &&
              ncclRecv(inplace, kCount, ncclInt32, peer, comm, NULL) == ncclSuccess && ncclGroupEnd() == ncclSuccess,
          "send/receive in place");
    for (size_t i = 0; i < kCount; ++i)
      CHECK(inplace[i] == (int32_t)(i * 7 + peer * 1000003 + round), "received in place, element %zu: %d", i,
            inplace[i]);
  }
  free(in);
  free(out);
  free(inplace);

  /* 2: frames from memory that never leave. */
  if (rank == 1) {
    sleep(4); /* rank 0's allreduce fills the sockets and times out meanwhile */
    CHECK(ncclCommAbort(comm) == ncclSuccess, "rank 1 aborts");
  } else {
    float* big = mmap(NULL, kBigBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(big != MAP_FAILED, "mmap");
    memset(big, 1, kBigBytes);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const ncclResult_t r = ncclAllReduce(big, big + kBigBytes / 8, kBigBytes / 8, ncclFloat, ncclSum, comm, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double took = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK(r == ncclTimeout, "the allreduce whose peer stopped returned %d", r);
    CHECK(took < 3.5, "the allreduce took %.1f s to time out after 2 s", took);
    CHECK(munmap(big, kBigBytes) == 0, "munmap");
    usleep(300 * 1000); /* the connection's proxy runs meanwhile */
    CHECK(ncclCommAbort(comm) == ncclSuccess, "rank 0 aborts");
  }
  printf("OK: rank %d\n", rank);
  return NULL;
}

int main(int argc, char** argv) {
  sockets = !(argc > 1 && strcmp(argv[1], "shm") == 0);
  return forkRanks(2, &id, body, setHost);
}
