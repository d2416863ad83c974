/* A call that fails inside a group fails the group, as in NCCL: the outermost
 * ncclGroupEnd runs nothing queued in it and returns the first error.
 *   1. Two ranks of one process: inside a group rank 0's allreduce has a bad
 *      datatype and rank 1's is fine; ncclGroupEnd returns
 *      ncclInvalidArgument and neither output changes. The thread's next
 *      group runs and sums.
 *   2. A grouped init of two ranks where rank 1's config is bad: ncclGroupEnd
 *      returns ncclInvalidArgument at once (rank 0's init does not wait for a
 *      rank 1 that never comes), and rank 0's communicator reports the error
 *      through ncclCommGetAsyncError and can be destroyed.
 *   3. Inside a group, an allreduce queued on a 1-rank communicator that is
 *      then destroyed, and one on another that is aborted: ncclGroupEnd runs
 *      neither (they would run on freed memory) and returns ncclSuccess.
 *   4. An init queued in a group that ncclGroupSimulateEnd ends never starts:
 *      its communicator reports ncclInvalidUsage, not "in progress" for good.
 *   5. A split queued in a group whose parent is then destroyed in the same
 *      group never runs (it would use the freed parent): the child reports
 *      ncclInvalidUsage and ncclGroupEnd returns ncclSuccess.
 *   6. Grouped inits of a blocking and a non-blocking communicator: the
 *      second is refused with ncclInvalidUsage, which fails the group (as
 *      NCCL: a group may not mix them), and both report the error.
 *   7. The same with ncclCommInitAll (blocking) after a non-blocking init in
 *      the caller's group: its communicators stay queued in that group,
 *      which fails them (they were freed at once before, and the group's end
 *      then freed them again).
 * Prints "OK" at the end. */
#define _POSIX_C_SOURCE 200809L
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
  ncclComm_t c[2];
  CHECK(ncclCommInitAll(c, 2, NULL) == ncclSuccess, "ncclCommInitAll");
  float buf[2][4] = {{1, 1, 1, 1}, {2, 2, 2, 2}};
  CHECK(ncclGroupStart() == ncclSuccess, "group start");
  CHECK(ncclAllReduce(buf[0], buf[0], 4, (ncclDataType_t)99, ncclSum, c[0], NULL) == ncclInvalidArgument,
        "a bad datatype was accepted");
  CHECK(ncclAllReduce(buf[1], buf[1], 4, ncclFloat, ncclSum, c[1], NULL) == ncclSuccess, "queued allreduce");
  ncclResult_t r = ncclGroupEnd();
  CHECK(r == ncclInvalidArgument, "the failed group's end returned %d", r);
  CHECK(buf[0][0] == 1 && buf[1][0] == 2, "the failed group ran: outputs %g and %g", buf[0][0], buf[1][0]);
  CHECK(ncclGroupStart() == ncclSuccess, "group start");
  for (int i = 0; i < 2; ++i)
    CHECK(ncclAllReduce(buf[i], buf[i], 4, ncclFloat, ncclSum, c[i], NULL) == ncclSuccess, "allreduce %d", i);
  CHECK(ncclGroupEnd() == ncclSuccess, "the next group failed");
  CHECK(buf[0][3] == 3 && buf[1][3] == 3, "the next group summed to %g and %g", buf[0][3], buf[1][3]);
  for (int i = 0; i < 2; ++i) CHECK(ncclCommDestroy(c[i]) == ncclSuccess, "destroy %d", i);

  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id) == ncclSuccess, "unique id");
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  ncclComm_t g[2] = {NULL, NULL};
  CHECK(ncclGroupStart() == ncclSuccess, "group start");
  CHECK(ncclCommInitRank(&g[0], 2, id, 0) == ncclSuccess, "queued init of rank 0");
  CHECK(ncclCommInitRankConfig(&g[1], 2, id, 1, &bad) == ncclInvalidArgument, "a bad config was accepted");
  const double t0 = now();
  r = ncclGroupEnd();
  const double took = now() - t0;
  CHECK(r == ncclInvalidArgument, "the failed grouped init's end returned %d", r);
  CHECK(took < 5, "the failed grouped init's end took %.1f s", took);
  ncclResult_t async = ncclSuccess;
  CHECK(g[0] && ncclCommGetAsyncError(g[0], &async) == ncclSuccess && async == ncclInvalidArgument,
        "rank 0's communicator reports %d", async);
  CHECK(ncclCommDestroy(g[0]) == ncclSuccess, "destroy rank 0's communicator");

  ncclComm_t one[2];
  int dev = 0;
  for (int i = 0; i < 2; ++i) CHECK(ncclCommInitAll(&one[i], 1, &dev) == ncclSuccess, "1-rank communicator %d", i);
  CHECK(ncclGroupStart() == ncclSuccess, "group start");
  for (int i = 0; i < 2; ++i)
    CHECK(ncclAllReduce(buf[i], buf[i], 4, ncclFloat, ncclSum, one[i], NULL) == ncclSuccess, "queued allreduce");
  CHECK(ncclCommDestroy(one[0]) == ncclSuccess && ncclCommAbort(one[1]) == ncclSuccess, "destroy and abort");
  r = ncclGroupEnd();
  CHECK(r == ncclSuccess, "the group whose communicators went returned %d", r);

  ncclComm_t never = NULL;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  CHECK(ncclGetUniqueId(&id) == ncclSuccess, "unique id");
  CHECK(ncclGroupStart() == ncclSuccess, "group start");
  CHECK(ncclCommInitRank(&never, 2, id, 0) == ncclSuccess, "queued init");
  CHECK(ncclGroupSimulateEnd(&sim) == ncclSuccess, "simulated end");
  CHECK(ncclCommGetAsyncError(never, &async) == ncclSuccess && async == ncclInvalidUsage,
        "the simulated group's init reports %d", async);
  CHECK(ncclCommDestroy(never) == ncclSuccess, "destroy the never-started communicator");

  ncclComm_t parent, child = NULL;
  CHECK(ncclCommInitAll(&parent, 1, &dev) == ncclSuccess, "parent");
  CHECK(ncclGroupStart() == ncclSuccess, "group start");
  CHECK(ncclCommSplit(parent, 0, 0, &child, NULL) == ncclSuccess && child, "queued split");
  CHECK(ncclCommDestroy(parent) == ncclSuccess, "destroy the parent inside the group");
  CHECK(ncclGroupEnd() == ncclSuccess, "the group of the dropped split failed");
  CHECK(ncclCommGetAsyncError(child, &async) == ncclSuccess && async == ncclInvalidUsage,
        "the dropped split's child reports %d", async);
  CHECK(ncclCommDestroy(child) == ncclSuccess, "destroy the child");

  ncclComm_t mixed[2] = {NULL, NULL};
  ncclUniqueId ids[2];
  ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER, nonblocking = NCCL_CONFIG_INITIALIZER;
  nonblocking.blocking = 0;
  for (int i = 0; i < 2; ++i) CHECK(ncclGetUniqueId(&ids[i]) == ncclSuccess, "unique id %d", i);
  CHECK(ncclGroupStart() == ncclSuccess, "group start");
  CHECK(ncclCommInitRankConfig(&mixed[0], 1, ids[0], 0, &blocking) == ncclSuccess, "queued blocking init");
  r = ncclCommInitRankConfig(&mixed[1], 1, ids[1], 0, &nonblocking);
  CHECK(r == ncclInvalidUsage, "a non-blocking init in a group of a blocking one returned %d", r);
  r = ncclGroupEnd();
  CHECK(r == ncclInvalidUsage, "the mixed group returned %d", r);
  for (int i = 0; i < 2; ++i) {
    CHECK(mixed[i] && ncclCommGetAsyncError(mixed[i], &async) == ncclSuccess && async == ncclInvalidUsage,
          "the mixed group's communicator %d reports %d", i, async);
    CHECK(ncclCommDestroy(mixed[i]) == ncclSuccess, "destroy the mixed group's communicator %d", i);
  }
  ncclComm_t lone = NULL, all[2] = {NULL, NULL};
  CHECK(ncclGetUniqueId(&ids[0]) == ncclSuccess, "unique id");
  CHECK(ncclGroupStart() == ncclSuccess, "group start");
  CHECK(ncclCommInitRankConfig(&lone, 1, ids[0], 0, &nonblocking) == ncclSuccess, "queued non-blocking init");
  r = ncclCommInitAll(all, 2, NULL);
  CHECK(r == ncclInvalidUsage, "ncclCommInitAll in a non-blocking group returned %d", r);
  r = ncclGroupEnd();
  CHECK(r == ncclInvalidUsage, "the group of the refused ncclCommInitAll returned %d", r);
  ncclComm_t made[3] = {lone, all[0], all[1]};
  for (int i = 0; i < 3; ++i) {
    CHECK(made[i] && ncclCommGetAsyncError(made[i], &async) == ncclSuccess && async == ncclInvalidUsage,
          "communicator %d of the refused group reports %d", i, async);
    CHECK(ncclCommDestroy(made[i]) == ncclSuccess, "destroy communicator %d of the refused group", i);
  }
  printf("OK\n");
  return 0;
}
