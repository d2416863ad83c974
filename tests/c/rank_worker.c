/* One rank of a multi-process test, rendezvousing through NCCL_COMM_ID (so no
 * id needs to be passed around). Usage: rank_worker RANK NRANKS COUNT ITERS, where
 * RANK and NRANKS may be "pmi": PMI_RANK and PMI_SIZE (an MPI-style launcher's).
 * Runs ITERS float allreduces of COUNT elements, checking each, and prints
 * "rank R: calling K" before each call and "rank R: iter K" after it, so that a
 * test can act mid-run. On failure prints
 * "rank R: FAILED code=C <last warning>" and exits with 10 + C. With
 * RANK_WORKER_FORK_CHILD set, it forks a child after init that holds every
 * descriptor it inherited and sleeps 60 s. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int arg(const char* text, const char* pmiVar) {
  const char* v = strcmp(text, "pmi") == 0 ? getenv(pmiVar) : text;
  return v ? atoi(v) : -1;
}

int main(int argc, char** argv) {
  if (argc < 5) { fprintf(stderr, "usage: rank_worker RANK NRANKS COUNT ITERS\n"); return 2; }
  int rank = arg(argv[1], "PMI_RANK"), nranks = arg(argv[2], "PMI_SIZE"), iters = atoi(argv[4]);
  size_t count = (size_t)atoll(argv[3]), i;
  ncclUniqueId id;
  ncclComm_t comm;
  ncclResult_t r;
  float* buf = malloc(count * sizeof(float));
  if ((r = ncclGetUniqueId(&id)) != ncclSuccess || (r = ncclCommInitRank(&comm, nranks, id, rank)) != ncclSuccess) {
    printf("rank %d: FAILED code=%d init: %s\n", rank, r, ncclGetLastError(NULL));
    return 10 + r;
  }
  printf("rank %d: ready\n", rank);
  fflush(stdout);
  if (getenv("RANK_WORKER_FORK_CHILD") && fork() == 0) {
    sleep(60);
    _exit(0);
  }
  for (int it = 0; it < iters; ++it) {
    for (i = 0; i < count; ++i) buf[i] = (float)(rank + (int)(i % 17));
    printf("rank %d: calling %d\n", rank, it);
    fflush(stdout);
    r = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
    if (r != ncclSuccess) {
      printf("rank %d: FAILED code=%d %s\n", rank, r, ncclGetLastError(NULL));
      fflush(stdout);
      ncclCommAbort(comm);
      return 10 + r;
    }
    for (i = 0; i < count; ++i) {
      float want = (float)(nranks * (nranks - 1) / 2 + nranks * (int)(i % 17));
      if (buf[i] != want) {
        printf("rank %d: FAILED wrong result at %zu: %g vs %g\n", rank, i, buf[i], want);
        return 3;
      }
    }
    printf("rank %d: iter %d\n", rank, it);
    fflush(stdout);
  }
  ncclCommDestroy(comm);
  printf("rank %d: done\n", rank);
  return 0;
}
