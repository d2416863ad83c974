/* A send whose receiver is gone before the connection between them exists:
 * 2 processes (a host each with NCCL_HOSTID=own, else one host); rank 1
 * exits right after init, rank 0 then sends to it. The send must fail within
 * seconds (not at ACCL_TIMEOUT), and the communicator must carry the error.
 * `p2p_peer_gone [own]`; prints "OK" from rank 0. */
#define _DEFAULT_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rank_test.h"

static ncclUniqueId id;
static int ownHosts;

static void ownHost(int r) {
  char host[32];
  snprintf(host, sizeof host, "host%d", r);
  if (ownHosts) setenv("NCCL_HOSTID", host, 1);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void* body(void* arg) {
  const int rank = (int)(long)arg;
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, 2, id, rank) == ncclSuccess, "init");
  if (rank == 1) _exit(0); /* gone without a word */
  static float x[1024];
  int status;
  CHECK(waitpid(-1, &status, 0) > 0, "waiting for rank 1 to exit"); /* this process forked it */
  const double t0 = now();
  const ncclResult_t r = ncclSend(x, 1024, ncclFloat, 1, comm, NULL);
  const double took = now() - t0;
  CHECK(r != ncclSuccess, "the send to a rank that exited succeeded");
  CHECK(took < 10, "the send failed only after %.1f s", took);
  ncclResult_t async = ncclSuccess;
  CHECK(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess,
        "the communicator carries no error after the failed send");
  ncclCommAbort(comm);
  printf("send failed after %.2f s with %d\nOK\n", took, r);
  return NULL;
}

int main(int argc, char** argv) {
  ownHosts = argc > 1 && strcmp(argv[1], "own") == 0;
  return forkRanks(2, &id, body, ownHost);
}
