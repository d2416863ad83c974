/* ncclCommSplit under NCCL_COMM_ID (set by the caller): 4 processes split by
 * parent rank parity, and each child's allreduce of the parent ranks must sum
 * its own colour's ranks only. The children's unique ids are ACCL's own, not
 * NCCL_COMM_ID's fixed address, which every colour's new rank 0 would share.
 * Then a shrink without rank 3. Prints "OK" from rank 0. */
#define _POSIX_C_SOURCE 200809L
#include <nccl.h>
#include <stdio.h>

#include "rank_test.h"

#define N 4
static ncclUniqueId id;

static void* body(void* arg) {
  int rank = (int)(long)arg;
  ncclComm_t parent, child, shrunk;
  CHECK(ncclCommInitRank(&parent, N, id, rank) == ncclSuccess, "init");
  CHECK(ncclCommSplit(parent, rank % 2, rank, &child, NULL) == ncclSuccess, "split");
  int n = 0;
  CHECK(ncclCommCount(child, &n) == ncclSuccess && n == N / 2, "the child has %d ranks", n);
  float x = (float)rank;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, child, NULL) == ncclSuccess, "child allreduce");
  const float want = rank % 2 ? 1 + 3 : 0 + 2;
  CHECK(x == want, "colour %d summed to %g, want %g", rank % 2, x, want);
  if (rank != 3) {
    int excluded = 3;
    CHECK(ncclCommShrink(parent, &excluded, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT) == ncclSuccess, "shrink");
    x = 1;
    CHECK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, shrunk, NULL) == ncclSuccess && x == 3,
          "the shrunk communicator summed to %g", x);
    CHECK(ncclCommDestroy(shrunk) == ncclSuccess, "destroy shrunk");
  }
  CHECK(ncclCommDestroy(child) == ncclSuccess, "destroy child");
  CHECK(ncclCommDestroy(parent) == ncclSuccess, "destroy parent");
  return NULL;
}

int main(void) {
  int rank = 0;
  CHECK(forkRanks(N, &id, body, NULL) == 0, "a rank failed");
  printf("OK\n");
  return 0;
}
