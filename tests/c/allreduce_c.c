/* A pure C consumer of libnccl.so.2: compiled against include/nccl.h, linked
 * with -lnccl. The parent makes the unique id and forks one process per rank;
 * each rank allreduces int32 and float values whose sums are exact and checks
 * every element. Usage: allreduce_c NRANKS COUNT. Exit 0 when every rank agrees. */
#include <nccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    ncclResult_t r_ = (call);                                                                \
    if (r_ != ncclSuccess) {                                                                 \
      fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                                       \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)

static int runRank(ncclUniqueId id, int nranks, int rank, size_t count) {
  ncclComm_t comm;
  int i, n = 0, me = -1, dev = 0, bad = 0;
  int32_t* ibuf = malloc(count * sizeof(int32_t));
  float* fsend = malloc(count * sizeof(float));
  float* frecv = malloc(count * sizeof(float));
  CHECK(ncclCommInitRank(&comm, nranks, id, rank));
  CHECK(ncclCommCount(comm, &n));
  CHECK(ncclCommUserRank(comm, &me));
  CHECK(ncclCommCuDevice(comm, &dev));
  if (n != nranks || me != rank || dev != -1) {
    fprintf(stderr, "rank %d: count/rank/device = %d/%d/%d\n", rank, n, me, dev);
    return 1;
  }
  for (i = 0; i < (int)count; ++i) {
    ibuf[i] = (rank + 1) * (i % 1000);
    fsend[i] = (float)((rank + 1) * (i % 64));
  }
  CHECK(ncclAllReduce(ibuf, ibuf, count, ncclInt32, ncclSum, comm, NULL)); /* in place */
  CHECK(ncclAllReduce(fsend, frecv, count, ncclFloat, ncclMax, comm, NULL));
  for (i = 0; i < (int)count; ++i) {
    int32_t wantI = (nranks * (nranks + 1) / 2) * (i % 1000);
    float wantF = (float)(nranks * (i % 64));
    if (ibuf[i] != wantI || frecv[i] != wantF) {
      if (bad++ < 5) fprintf(stderr, "rank %d: element %d: %d/%g, expected %d/%g\n", rank, i, ibuf[i],
                             frecv[i], wantI, wantF);
    }
  }
  CHECK(ncclCommDestroy(comm));
  free(ibuf);
  free(fsend);
  free(frecv);
  return bad ? 1 : 0;
}

int main(int argc, char** argv) {
  int nranks = argc > 1 ? atoi(argv[1]) : 2, rank = -1, r, status, failed = 0;
  size_t count = argc > 2 ? (size_t)atoll(argv[2]) : 1000003;
  int version = 0;
  ncclUniqueId id;
  pid_t* pids = calloc(nranks, sizeof(pid_t));
  CHECK(ncclGetVersion(&version));
  printf("NCCL API %d\n", version);
  CHECK(ncclGetUniqueId(&id));
  for (r = 0; r < nranks; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) {
      alarm(120); /* never hang a test run */
      _exit(runRank(id, nranks, r, count));
    }
  }
  for (r = 0; r < nranks; ++r) {
    waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d failed (status 0x%x)\n", r, status);
      failed = 1;
    }
  }
  printf("%s: %d ranks, %zu elements\n", failed ? "FAILED" : "OK", nranks, count);
  free(pids);
  return failed;
}
