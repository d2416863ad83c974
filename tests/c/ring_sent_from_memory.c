/* The ring's chunks go out over sockets straight from the caller's buffers
 * (coll/primitives.h): three processes, each its own NCCL_HOSTID, with
 * NCCL_ALGO=ring. Two rounds of allreduce, allgather and broadcast, each out
 * of place and in place (NCCL's layouts), 4 MiB of integers per rank with
 * exact results; right after every call its buffers are overwritten, so a
 * frame still reading them would spoil the next round's results or this
 * one's (the check comes after the overwrite of the inputs). Prints
 * "OK: rank R" from each rank. */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rank_test.h"

enum { kRanks = 3, kCount = 1 << 20, kRoot = 1 };

static ncclUniqueId id;

static void setHost(int rank) {
  char host[32];
  snprintf(host, sizeof(host), "host%d", rank);
  setenv("NCCL_HOSTID", host, 1);
  setenv("NCCL_ALGO", "ring", 1);
}

static int32_t* ints(size_t n) {
  int32_t* p = malloc(n * sizeof(int32_t));
  if (!p) exit(3);
  return p;
}

static int32_t value(size_t i, int rank, int round) { return (int32_t)(i * 7 + rank * 1000003 + round * 13); }

static void* body(void* arg) {
  const int rank = (int)(long)arg;
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, kRanks, id, rank) == ncclSuccess, "init");
  int32_t *in = ints(kCount), *out = ints(kCount * kRanks), *buf = ints(kCount * kRanks);
  for (int round = 0; round < 2; ++round) {
    /* allreduce: every rank's value summed */
    for (size_t i = 0; i < kCount; ++i) in[i] = buf[i] = value(i, rank, round);
    CHECK(ncclAllReduce(in, out, kCount, ncclInt32, ncclSum, comm, NULL) == ncclSuccess, "allreduce");
    CHECK(ncclAllReduce(buf, buf, kCount, ncclInt32, ncclSum, comm, NULL) == ncclSuccess, "allreduce in place");
    memset(in, 0xff, kCount * sizeof(int32_t));
    for (size_t i = 0; i < kCount; ++i) {
      int32_t want = 0;
      for (int k = 0; k < kRanks; ++k) want += value(i, k, round);
      CHECK(out[i] == want && buf[i] == want, "round %d allreduce element %zu: %d and %d, want %d", round, i, out[i],
            buf[i], want);
    }
    memset(out, 0xff, kCount * sizeof(int32_t));
    memset(buf, 0xff, kCount * sizeof(int32_t));

    /* allgather: block k is rank k's values */
    for (size_t i = 0; i < kCount; ++i) in[i] = buf[(size_t)rank * kCount + i] = value(i, rank, round);
    CHECK(ncclAllGather(in, out, kCount, ncclInt32, comm, NULL) == ncclSuccess, "allgather");
    CHECK(ncclAllGather(buf + (size_t)rank * kCount, buf, kCount, ncclInt32, comm, NULL) == ncclSuccess,
          "allgather in place");
    memset(in, 0xff, kCount * sizeof(int32_t));
    for (int k = 0; k < kRanks; ++k)
      for (size_t i = 0; i < kCount; ++i) {
        const size_t at = (size_t)k * kCount + i;
        CHECK(out[at] == value(i, k, round) && buf[at] == value(i, k, round),
              "round %d allgather block %d element %zu: %d and %d", round, k, i, out[at], buf[at]);
      }
    memset(out, 0xff, kCount * kRanks * sizeof(int32_t));
    memset(buf, 0xff, kCount * kRanks * sizeof(int32_t));

    /* broadcast from kRoot */
    for (size_t i = 0; i < kCount; ++i) in[i] = buf[i] = value(i, rank, round);
    CHECK(ncclBroadcast(in, out, kCount, ncclInt32, kRoot, comm, NULL) == ncclSuccess, "broadcast");
    CHECK(ncclBroadcast(buf, buf, kCount, ncclInt32, kRoot, comm, NULL) == ncclSuccess, "broadcast in place");
    memset(in, 0xff, kCount * sizeof(int32_t));
    for (size_t i = 0; i < kCount; ++i)
      CHECK(out[i] == value(i, kRoot, round) && buf[i] == value(i, kRoot, round),
            "round %d broadcast element %zu: %d and %d", round, i, out[i], buf[i]);
    memset(out, 0xff, kCount * sizeof(int32_t));
    memset(buf, 0xff, kCount * sizeof(int32_t));
  }
  free(in);
  free(out);
  free(buf);
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  printf("OK: rank %d\n", rank);
  return NULL;
}

int main(void) { return forkRanks(kRanks, &id, body, setHost); }
