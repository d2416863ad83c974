/* Bad arguments to every implemented function: each must return the documented
 * error and leave a WARN (ncclGetLastError) naming the function, never crash.
 * Prints "N passed, M failed"; exit 0 when all pass. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed = 0, failed = 0;

static void expect(const char* what, ncclResult_t got, ncclResult_t want, const char* warnHas) {
  const char* last = ncclGetLastError(NULL);
  int ok = got == want && (!warnHas || strstr(last, warnHas) != NULL);
  if (ok) {
    ++passed;
  } else {
    ++failed;
    printf("FAIL %s: got %d (%s), want %d; last warning: \"%s\" (expected to contain \"%s\")\n", what, got,
           ncclGetErrorString(got), want, last, warnHas ? warnHas : "");
  }
}

int main(void) {
  ncclUniqueId id, zeros;
  ncclComm_t comm = NULL, dead = NULL, comms[2];
  int v, devs[2] = {0, -1};
  float buf[4] = {1, 2, 3, 4};
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  void* p = NULL;
  struct { char junk[256]; } fake;
  memset(&zeros, 0, sizeof(zeros));
  memset(&fake, 0x5a, sizeof(fake));

  expect("GetVersion(NULL)", ncclGetVersion(NULL), ncclInvalidArgument, "ncclGetVersion");
  expect("GetUniqueId(NULL)", ncclGetUniqueId(NULL), ncclInvalidArgument, "ncclGetUniqueId");
  if (ncclGetUniqueId(&id) != ncclSuccess) { printf("FAIL cannot make an id\n"); return 1; }

  expect("InitRank(NULL comm)", ncclCommInitRank(NULL, 1, id, 0), ncclInvalidArgument, "ncclCommInitRank");
  expect("InitRank(nranks 0)", ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument, "nranks");
  expect("InitRank(nranks -3)", ncclCommInitRank(&comm, -3, id, 0), ncclInvalidArgument, "nranks");
  expect("InitRank(rank -1)", ncclCommInitRank(&comm, 2, id, -1), ncclInvalidArgument, "rank = -1");
  expect("InitRank(rank == nranks)", ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument, "rank = 2");
  expect("InitRank(zero id)", ncclCommInitRank(&comm, 1, zeros, 0), ncclInvalidArgument, "ncclUniqueId");
  cfg.magic = 0xdeadbeef;
  expect("InitRankConfig(bad magic)", ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument, "magic");
  cfg = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  cfg.size = 3;
  expect("InitRankConfig(bad size)", ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument, "size");
  cfg = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 7;
  expect("InitRankConfig(blocking 7)", ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument, "blocking");
  if (comm != NULL) { ++failed; printf("FAIL failed init left *comm set\n"); }
  expect("InitAll(NULL)", ncclCommInitAll(NULL, 2, NULL), ncclInvalidArgument, "ncclCommInitAll");
  expect("InitAll(ndev 0)", ncclCommInitAll(comms, 0, NULL), ncclInvalidArgument, "ndev");
  expect("InitAll(devlist -1)", ncclCommInitAll(comms, 2, devs), ncclInvalidArgument, "devlist[1]");

  /* A real one-rank communicator for the calls that take one. */
  if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) { printf("FAIL 1-rank init\n"); return 1; }
  expect("Count(NULL comm)", ncclCommCount(NULL, &v), ncclInvalidArgument, "ncclCommCount");
  expect("Count(NULL out)", ncclCommCount(comm, NULL), ncclInvalidArgument, "count is NULL");
  expect("CuDevice(NULL out)", ncclCommCuDevice(comm, NULL), ncclInvalidArgument, "ncclCommCuDevice");
  expect("UserRank(NULL comm)", ncclCommUserRank(NULL, &v), ncclInvalidArgument, "ncclCommUserRank");
  expect("UserRank(fake comm)", ncclCommUserRank((ncclComm_t)&fake, &v), ncclInvalidArgument, "not a live");
  expect("GetAsyncError(NULL comm)", ncclCommGetAsyncError(NULL, NULL), ncclInvalidArgument, "ncclCommGetAsyncError");
  expect("GetAsyncError(NULL out)", ncclCommGetAsyncError(comm, NULL), ncclInvalidArgument, "asyncError is NULL");
  expect("Finalize(NULL)", ncclCommFinalize(NULL), ncclInvalidArgument, "ncclCommFinalize");

  expect("AllReduce(NULL comm)", ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, NULL, NULL), ncclInvalidArgument, "ncclAllReduce: comm is NULL");
  expect("AllReduce(type 12)", ncclAllReduce(buf, buf, 4, (ncclDataType_t)12, ncclSum, comm, NULL), ncclInvalidArgument, "datatype 12");
  expect("AllReduce(type -1)", ncclAllReduce(buf, buf, 4, (ncclDataType_t)-1, ncclSum, comm, NULL), ncclInvalidArgument, "datatype -1");
  expect("AllReduce(op 5)", ncclAllReduce(buf, buf, 4, ncclFloat, (ncclRedOp_t)5, comm, NULL), ncclInvalidArgument, "op 5");
  expect("AllReduce(op -2)", ncclAllReduce(buf, buf, 4, ncclFloat, (ncclRedOp_t)-2, comm, NULL), ncclInvalidArgument, "op -2");
  expect("AllReduce(NULL send)", ncclAllReduce(NULL, buf, 4, ncclFloat, ncclSum, comm, NULL), ncclInvalidArgument, "sendbuff is NULL");
  expect("AllReduce(NULL recv)", ncclAllReduce(buf, NULL, 4, ncclFloat, ncclSum, comm, NULL), ncclInvalidArgument, "recvbuff is NULL");
  expect("AllReduce(huge count)", ncclAllReduce(buf, buf, (size_t)-1 / 2, ncclFloat, ncclSum, comm, NULL), ncclInvalidArgument, "overflows");
  expect("AllReduce(count 0, NULL)", ncclAllReduce(NULL, NULL, 0, ncclFloat, ncclSum, comm, NULL), ncclSuccess, NULL);
  expect("AllReduce(float16, not yet)", ncclAllReduce(buf, buf, 2, ncclFloat16, ncclSum, comm, NULL), ncclInvalidUsage, "float16");
  expect("AllReduce(avg, not yet)", ncclAllReduce(buf, buf, 4, ncclFloat, ncclAvg, comm, NULL), ncclInvalidUsage, "avg");
  expect("AllReduce(1 rank)", ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comm, NULL), ncclSuccess, NULL);
  if (buf[3] != 4) { ++failed; printf("FAIL 1-rank allreduce changed the data\n"); }
  expect("Broadcast(unsupported)", ncclBroadcast(buf, buf, 4, ncclFloat, 0, comm, NULL), ncclInvalidUsage, "ncclBroadcast is not supported");
  expect("GroupEnd without start", ncclGroupEnd(), ncclInvalidUsage, "ncclGroupEnd");
  expect("MemAlloc(NULL)", ncclMemAlloc(NULL, 16), ncclInvalidArgument, "ncclMemAlloc");
  expect("MemAlloc", ncclMemAlloc(&p, 1000), ncclSuccess, NULL);
  if (!p || ((size_t)p & 4095)) { ++failed; printf("FAIL ncclMemAlloc alignment\n"); }
  expect("MemFree", ncclMemFree(p), ncclSuccess, NULL);

  dead = comm;
  expect("Destroy", ncclCommDestroy(comm), ncclSuccess, NULL);
  expect("AllReduce(destroyed comm)", ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, dead, NULL), ncclInvalidArgument, "not a live");
  expect("Destroy(destroyed comm)", ncclCommDestroy(dead), ncclInvalidArgument, "not a live");
  expect("Destroy(NULL)", ncclCommDestroy(NULL), ncclSuccess, NULL);
  expect("Abort(NULL)", ncclCommAbort(NULL), ncclSuccess, NULL);
  if (strcmp(ncclGetErrorString((ncclResult_t)99), "unknown result code") != 0) { ++failed; printf("FAIL error string\n"); }

  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
