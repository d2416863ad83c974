/* Every collective and point-to-point call of the C API on int32 data whose
 * results are exact, from forked ranks. Usage: collectives NRANKS COUNT.
 * TEST_HOSTS=H puts rank r on emulated host r*H/NRANKS (its NCCL_HOSTID);
 * TEST_HOSTS=-H on host r%H (the hosts' ranks interleaved).
 * Each rank prints "rank R: N passed, M failed"; exit 0 when all ranks pass. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#define NCCL_OS_LINUX           /* ncclResetDebugInit declared */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int rank, nranks, passed, failed;

static void expect(const char* what, int ok) {
  if (ok) ++passed;
  else { ++failed; printf("rank %d: FAIL %s (%s)\n", rank, what, ncclGetLastError(NULL)); }
}
#define OK(call) expect(#call, (call) == ncclSuccess)

static int32_t val(int r, size_t i) { return (int32_t)(r * 1000 + (int)(i % 997)) - 300; }

static int check(const int32_t* got, size_t n, int32_t (*want)(size_t, void*), void* ctx) {
  size_t i;
  for (i = 0; i < n; ++i)
    if (got[i] != want(i, ctx)) {
      printf("rank %d: element %zu: %d, expected %d\n", rank, i, got[i], want(i, ctx));
      return 0;
    }
  return 1;
}

static int32_t wantSum(size_t i, void* c) { int r; int32_t s = 0; (void)c; for (r = 0; r < nranks; ++r) s += val(r, i); return s; }
static int32_t wantMax(size_t i, void* c) { (void)c; return val(nranks - 1, i); }
static int32_t wantAvg(size_t i, void* c) { return wantSum(i, c) / nranks; }
static int32_t wantPre(size_t i, void* c) { return 3 * wantSum(i, c); }
static int32_t wantRoot(size_t i, void* c) { return val(*(int*)c, i); }

/* A communicator from nId unique ids (ncclCommInitRankScalable), checked by one allreduce of `in`. */
static void scalableAllreduce(int nId, ncclUniqueId* ids, const int32_t* in, int32_t* out, size_t count,
                              const char* what) {
  ncclComm_t sc;
  size_t i;
  int ok = 1;
  OK(ncclCommInitRankScalable(&sc, nranks, rank, nId, ids, NULL));
  OK(ncclAllReduce(in, out, count, ncclInt32, ncclSum, sc, NULL));
  for (i = 0; i < count; ++i) ok &= out[i] == wantSum(i, NULL);
  expect(what, ok);
  OK(ncclCommDestroy(sc));
}
static size_t gCount;
static int32_t wantGathered(size_t i, void* c) { (void)c; return val((int)(i / gCount), i % gCount); }
static int32_t wantA2a(size_t i, void* c) {  /* block p from rank p: its block for us */
  (void)c; return val((int)(i / gCount), rank * gCount + i % gCount);
}
static int32_t wantRs(size_t i, void* c) {
  int r; int32_t s = 0; (void)c; for (r = 0; r < nranks; ++r) s += val(r, rank * gCount + i); return s;
}

static ncclUniqueId scalableIds[3];
static ncclUniqueId repeatedIds[4]; /* one id passed three times: released once */

static int runRank(ncclUniqueId id, size_t count) {
  ncclComm_t comm, half;
  int root, peer;
  size_t i, n = (size_t)nranks;
  /* n blocks of count, and at least two (the send/recv test uses two output blocks) */
  int32_t* in = malloc(count * (n + 1) * sizeof(int32_t));
  int32_t* out = malloc(count * (n + 1) * sizeof(int32_t));
  int32_t scalar = 3;
  ncclRedOp_t pre;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  gCount = count;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 1;
  for (i = 0; i < count * n; ++i) in[i] = val(rank, i);

  OK(ncclAllReduce(in, out, count, ncclInt32, ncclSum, comm, NULL));
  expect("allreduce sum", check(out, count, wantSum, NULL));
  OK(ncclAllReduce(in, out, count, ncclInt32, ncclMax, comm, NULL));
  expect("allreduce max", check(out, count, wantMax, NULL));
  OK(ncclAllReduce(in, out, count, ncclInt32, ncclAvg, comm, NULL));
  expect("allreduce avg (integer: sum then divide)", check(out, count, wantAvg, NULL));
  OK(ncclRedOpCreatePreMulSum(&pre, &scalar, ncclInt32, ncclScalarHostImmediate, comm));
  OK(ncclAllReduce(in, out, count, ncclInt32, pre, comm, NULL));
  expect("allreduce premulsum", check(out, count, wantPre, NULL));
  OK(ncclRedOpDestroy(pre, comm));
  /* NCCL allows destroying an op as soon as the call using it returns, even inside a group. */
  OK(ncclGroupStart());
  OK(ncclRedOpCreatePreMulSum(&pre, &scalar, ncclInt32, ncclScalarHostImmediate, comm));
  OK(ncclAllReduce(in, out, count, ncclInt32, pre, comm, NULL));
  OK(ncclRedOpDestroy(pre, comm));
  OK(ncclGroupEnd());
  expect("premulsum destroyed inside its group", check(out, count, wantPre, NULL));
  expect("destroyed op is rejected",
         ncclAllReduce(in, out, count, ncclInt32, pre, comm, NULL) == ncclInvalidArgument);
  for (root = 0; root < nranks; ++root) {
    memset(out, 0, count * sizeof(int32_t));
    OK(ncclBroadcast(in, out, count, ncclInt32, root, comm, NULL));
    expect("broadcast", check(out, count, wantRoot, &root));
    memset(out, 0, count * sizeof(int32_t));
    OK(ncclReduce(in, out, count, ncclInt32, ncclSum, root, comm, NULL));
    if (rank == root) expect("reduce", check(out, count, wantSum, NULL));
  }
  OK(ncclAllGather(in, out, count, ncclInt32, comm, NULL));
  expect("allgather", check(out, count * n, wantGathered, NULL));
  OK(ncclReduceScatter(in, out, count, ncclInt32, ncclSum, comm, NULL));
  expect("reducescatter", check(out, count, wantRs, NULL));
  OK(ncclAlltoAll(in, out, count, ncclInt32, comm, NULL));
  expect("alltoall", check(out, count * n, wantA2a, NULL));
  memcpy(out, in, count * n * sizeof(int32_t));
  OK(ncclAlltoAll(out, out, count, ncclInt32, comm, NULL));
  expect("alltoall in place", check(out, count * n, wantA2a, NULL));
  { /* Twice in place in one group, on different data: the first call's sends
     * still hold its staging copy when the second makes its own. Then once more
     * alone, which reuses the communicator's copy. */
    int32_t* two = malloc(count * n * sizeof(int32_t) + 1);
    int ok = 1;
    memcpy(out, in, count * n * sizeof(int32_t));
    for (i = 0; i < count * n; ++i) two[i] = in[i] + 7;
    OK(ncclGroupStart());
    OK(ncclAlltoAll(out, out, count, ncclInt32, comm, NULL));
    OK(ncclAlltoAll(two, two, count, ncclInt32, comm, NULL));
    OK(ncclGroupEnd());
    for (i = 0; i < count * n; ++i) ok &= out[i] == wantA2a(i, NULL) && two[i] == wantA2a(i, NULL) + 7;
    expect("two in-place alltoalls in one group", ok);
    memcpy(two, in, count * n * sizeof(int32_t));
    OK(ncclAlltoAll(two, two, count, ncclInt32, comm, NULL));
    expect("alltoall in place again", check(two, count * n, wantA2a, NULL));
    free(two);
  }
  root = nranks - 1;
  OK(ncclGather(in, out, count, ncclInt32, root, comm, NULL));
  if (rank == root) expect("gather", check(out, count * n, wantGathered, NULL));
  OK(ncclScatter(in, out, count, ncclInt32, root, comm, NULL));
  { /* rank r gets block r of root's input */
    int ok = 1;
    for (i = 0; i < count; ++i) ok &= out[i] == val(root, rank * count + i);
    expect("scatter", ok);
  }
  /* A ring shift with the receive posted before the send, and a self-send, in one group. */
  peer = (rank + 1) % nranks;
  OK(ncclGroupStart());
  OK(ncclRecv(out, count, ncclInt32, (rank + nranks - 1) % nranks, comm, NULL));
  OK(ncclSend(in, count, ncclInt32, peer, comm, NULL));
  OK(ncclSend(in, count, ncclInt32, rank, comm, NULL));
  OK(ncclRecv(out + count, count, ncclInt32, rank, comm, NULL));
  OK(ncclGroupEnd());
  {
    int prev = (rank + nranks - 1) % nranks, ok = 1;
    for (i = 0; i < count; ++i) ok &= out[i] == val(prev, i) && out[count + i] == val(rank, i);
    expect("send/recv ring shift + self", ok);
  }
  /* Split into even and odd ranks; allreduce inside each half. */
  OK(ncclCommSplit(comm, rank % 2, -rank, &half, NULL));
  {
    int hr = -1, hn = 0, r, ok = 1;
    ncclCommUserRank(half, &hr);
    ncclCommCount(half, &hn);
    expect("split size", hn == (nranks + 1 - rank % 2) / 2);
    /* key = -rank: the highest parent rank of the half becomes rank 0 */
    expect("split key order", hr == (nranks - 1 - rank) / 2);
    OK(ncclAllReduce(in, out, count, ncclInt32, ncclSum, half, NULL));
    for (i = 0; i < count; ++i) {
      int32_t s = 0;
      for (r = rank % 2; r < nranks; r += 2) s += val(r, i);
      ok &= out[i] == s;
    }
    expect("allreduce in split", ok);
    OK(ncclCommDestroy(half));
  }
  OK(ncclCommSplit(comm, NCCL_SPLIT_NOCOLOR, 0, &half, NULL));
  expect("NOCOLOR gives NULL", half == NULL);
  /* Buffers that are not 16-byte aligned (one and three elements in). */
  if (count > 0) {
    int ok = 1;
    size_t m = count - 1;
    int32_t* uin = malloc((count * n + 4) * sizeof(int32_t));
    int32_t* uout = malloc((count * n + 4) * sizeof(int32_t));
    for (i = 0; i < m; ++i) uin[1 + i] = val(rank, i);
    OK(ncclAllReduce(uin + 1, uout + 3, m, ncclInt32, ncclSum, comm, NULL));
    for (i = 0; i < m; ++i) ok &= uout[3 + i] == wantSum(i, NULL);
    expect("allreduce, unaligned buffers", ok);
    OK(ncclAllGather(uin + 1, uout + 3, m, ncclInt32, comm, NULL));
    for (i = 0; i < m * n; ++i) ok &= uout[3 + i] == val((int)(i / m), i % m);
    expect("allgather, unaligned buffers", ok);
    free(uin);
    free(uout);
  }
  /* More communicators from several unique ids (ncclCommInitRankScalable). */
  scalableAllreduce(3, scalableIds, in, out, count, "allreduce on a scalable-init communicator");
  scalableAllreduce(4, repeatedIds, in, out, count, "allreduce on a scalable-init communicator from a repeated id");
  OK(ncclGroupStart());
  OK(ncclAllReduce(in, out, count, ncclInt32, ncclSum, comm, NULL));
  OK(ncclGroupSimulateEnd(&sim));
  expect("simulate gives a time", count == 0 || sim.estimatedTime > 0);
  OK(ncclCommDestroy(comm));
  free(in);
  free(out);
  printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
  return failed ? 1 : 0;
}

/* TEST_HOSTS: this rank's host, read again in the child (the parent read the parameters for its ids). */
static void joinHost(void) {
  const char* h = getenv("TEST_HOSTS");
  char id[32];
  if (!h || atoi(h) == 0) return;
  snprintf(id, sizeof(id), "testhost%d", atoi(h) < 0 ? rank % -atoi(h) : rank * atoi(h) / nranks);
  setenv("NCCL_HOSTID", id, 1);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  ncclResetDebugInit();
#pragma GCC diagnostic pop
}

int main(int argc, char** argv) {
  int r, status, bad = 0;
  size_t count = argc > 2 ? (size_t)atoll(argv[2]) : 1000;
  ncclUniqueId id;
  pid_t pids[64];
  nranks = argc > 1 ? atoi(argv[1]) : 3;
  if (nranks < 1 || nranks > 64 || ncclGetUniqueId(&id) != ncclSuccess) return 2;
  for (r = 0; r < 3; ++r)
    if (ncclGetUniqueId(&scalableIds[r]) != ncclSuccess) return 2;
  if (ncclGetUniqueId(&repeatedIds[0]) != ncclSuccess || ncclGetUniqueId(&repeatedIds[1]) != ncclSuccess) return 2;
  repeatedIds[2] = repeatedIds[3] = repeatedIds[1];
  for (r = 0; r < nranks; ++r) {
    if ((pids[r] = fork()) == 0) {
      alarm(120);
      rank = r;
      joinHost();
      fflush(stdout);
      r = runRank(id, count);
      fflush(stdout);
      _exit(r);
    }
  }
  for (r = 0; r < nranks; ++r) {
    waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad = 1;
  }
  return bad;
}
