/* Bad arguments to every implemented function: each must return the documented
 * error and leave a WARN (ncclGetLastError) naming the function, never crash.
 * Prints "N passed, M failed"; exit 0 when all pass. */
#include <accl.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exported by libnccl.so.2 but declared in NCCL's device headers, not nccl.h;
 * ACCL does not implement it yet. */
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void* devComm);

static int passed = 0, failed = 0;

/* Another thread's bad call, whose WARN comes after this thread's. */
static void* otherThreadWarns(void* arg) {
  (void)arg;
  ncclCommCount(NULL, NULL);
  return NULL;
}

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
  /* Refused before anything is sized by it (it grew memory until the OOM killer came). */
  expect("InitRank(nranks INT_MAX)", ncclCommInitRank(&comm, 2147483647, id, 0), ncclInvalidArgument,
         "outside [1, 1048576]");
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
  /* NCCL 2.27 and 2.30's fields, out of the range NCCL validates. */
#define BAD_FIELD(field, value)                                                                    \
  cfg = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;                                                     \
  cfg.field = value;                                                                               \
  expect("InitRankConfig(" #field " " #value ")", ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), \
         ncclInvalidArgument, "ncclConfig_t." #field)
  BAD_FIELD(nvlsCTAs, 0);
  BAD_FIELD(nChannelsPerNetPeer, 0);
  BAD_FIELD(nChannelsPerNetPeer, 100000);
  BAD_FIELD(nvlinkCentricSched, 2);
  BAD_FIELD(graphUsageMode, 3);
  BAD_FIELD(numRmaCtx, -1);
  BAD_FIELD(maxP2pPeers, 0);
  BAD_FIELD(graphStreamOrdering, 5);
  BAD_FIELD(CTAPolicy, 4);
#undef BAD_FIELD
  cfg = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  cfg.netName = "NoSuchNet";
  expect("InitRankConfig(netName)", ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument,
         "netName = \"NoSuchNet\" names no network here (there are: Socket");
  if (comm != NULL) { ++failed; printf("FAIL failed init left *comm set\n"); }
  expect("InitAll(NULL)", ncclCommInitAll(NULL, 2, NULL), ncclInvalidArgument, "ncclCommInitAll");
  expect("InitAll(ndev 0)", ncclCommInitAll(comms, 0, NULL), ncclInvalidArgument, "ndev");
  expect("InitAll(devlist -1)", ncclCommInitAll(comms, 2, devs), ncclInvalidArgument, "devlist[1]");

  /* A real one-rank communicator for the calls that take one. */
  /* Both CTA policy bits (NCCL's bitmask), and a netName in another case: taken. */
  cfg = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  cfg.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO;
  cfg.netName = "socket";
  if (ncclCommInitRankConfig(&comm, 1, id, 0, &cfg) != ncclSuccess) { printf("FAIL 1-rank init\n"); return 1; }
  expect("InitRankConfig(CTAPolicy 3) says it is not used", ncclSuccess, ncclSuccess,
         "CTAPolicy = 3 is valid, but ACCL does not use it");
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
  expect("AllReduce(1 rank)", ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comm, NULL), ncclSuccess, NULL);
  if (buf[3] != 4) { ++failed; printf("FAIL 1-rank allreduce changed the data\n"); }
  expect("CommGrow(NULL newcomm)", ncclCommGrow(comm, 2, NULL, -1, NULL, NULL), ncclInvalidArgument, "newcomm is NULL");
  expect("DevCommDestroy(unsupported)", ncclDevCommDestroy(comm, NULL), ncclInvalidUsage,
         "ncclDevCommDestroy is not supported");
  expect("ParamBind(NULL out)", ncclParamBind(NULL, "NCCL_DEBUG"), ncclInvalidArgument, "out is NULL");
  expect("Broadcast(root 1 of 1)", ncclBroadcast(buf, buf, 4, ncclFloat, 1, comm, NULL), ncclInvalidArgument, "root 1");
  expect("Reduce(root -1)", ncclReduce(buf, buf, 4, ncclFloat, ncclSum, -1, comm, NULL), ncclInvalidArgument, "root -1");
  expect("Reduce(NULL recv at root)", ncclReduce(buf, NULL, 4, ncclFloat, ncclSum, 0, comm, NULL), ncclInvalidArgument, "recvbuff is NULL");
  expect("Send(peer 3)", ncclSend(buf, 4, ncclFloat, 3, comm, NULL), ncclInvalidArgument, "peer 3");
  expect("Recv(NULL)", ncclRecv(NULL, 4, ncclFloat, 0, comm, NULL), ncclInvalidArgument, "recvbuff is NULL");
  expect("AllGather(type 99)", ncclAllGather(buf, buf, 1, (ncclDataType_t)99, comm, NULL), ncclInvalidArgument, "datatype 99");
  expect("ReduceScatter(op 7)", ncclReduceScatter(buf, buf, 1, ncclFloat, (ncclRedOp_t)7, comm, NULL), ncclInvalidArgument, "op 7");
  expect("AlltoAll(NULL send)", ncclAlltoAll(NULL, buf, 1, ncclFloat, comm, NULL), ncclInvalidArgument, "sendbuff is NULL");
  expect("Gather(root 5)", ncclGather(buf, buf, 1, ncclFloat, 5, comm, NULL), ncclInvalidArgument, "root 5");
  expect("Scatter(NULL recv)", ncclScatter(buf, NULL, 1, ncclFloat, 0, comm, NULL), ncclInvalidArgument, "recvbuff is NULL");
  {
    ncclRedOp_t pre;
    float two = 2;
    ncclComm_t other;
    ncclUniqueId id2;
    expect("PreMulSum(NULL op)", ncclRedOpCreatePreMulSum(NULL, &two, ncclFloat, ncclScalarHostImmediate, comm), ncclInvalidArgument, "op is NULL");
    expect("PreMulSum(bad residence)", ncclRedOpCreatePreMulSum(&pre, &two, ncclFloat, (ncclScalarResidence_t)9, comm), ncclInvalidArgument, "residence 9");
    expect("PreMulSum", ncclRedOpCreatePreMulSum(&pre, &two, ncclFloat, ncclScalarHostImmediate, comm), ncclSuccess, NULL);
    expect("AllReduce(premulsum, wrong type)", ncclAllReduce(buf, buf, 4, ncclInt32, pre, comm, NULL), ncclInvalidArgument, "created for float32");
    expect("AllReduce(premulsum x2)", ncclAllReduce(buf, buf, 4, ncclFloat, pre, comm, NULL), ncclSuccess, NULL);
    if (buf[3] != 8) { ++failed; printf("FAIL premulsum on one rank: %g\n", buf[3]); }
    buf[0] = 1; buf[1] = 2; buf[2] = 3; buf[3] = 4;
    ncclGetUniqueId(&id2);
    ncclCommInitRank(&other, 1, id2, 0);
    expect("AllReduce(op of another comm)", ncclAllReduce(buf, buf, 4, ncclFloat, pre, other, NULL), ncclInvalidArgument, "not a reduction operation of this communicator");
    expect("RedOpDestroy(other comm)", ncclRedOpDestroy(pre, other), ncclInvalidArgument, "not created on this communicator");
    expect("RedOpDestroy(builtin)", ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument, "built-in");
    expect("RedOpDestroy", ncclRedOpDestroy(pre, comm), ncclSuccess, NULL);
    expect("AllReduce(destroyed op)", ncclAllReduce(buf, buf, 4, ncclFloat, pre, comm, NULL), ncclInvalidArgument, "not a reduction operation");
    expect("RedOpDestroy twice", ncclRedOpDestroy(pre, comm), ncclInvalidArgument, "already destroyed");
    ncclCommDestroy(other);
  }
  {
    ncclComm_t child;
    void* h;
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    expect("Split(NULL out)", ncclCommSplit(comm, 0, 0, NULL, NULL), ncclInvalidArgument, "newcomm is NULL");
    expect("Split(color -5)", ncclCommSplit(comm, -5, 0, &child, NULL), ncclInvalidArgument, "color -5");
    expect("Register(NULL handle)", ncclCommRegister(comm, buf, 16, NULL), ncclInvalidArgument, "handle is NULL");
    expect("Register", ncclCommRegister(comm, buf, 16, &h), ncclSuccess, NULL);
    expect("Deregister", ncclCommDeregister(comm, h), ncclSuccess, NULL);
    expect("Deregister twice", ncclCommDeregister(comm, h), ncclInvalidArgument, "was not returned");
    /* Sizes past the memory behind the pointer: refused, so no later call reads or writes past it. */
    expect("Register(SIZE_MAX)", ncclCommRegister(comm, buf, (size_t)-1, &h), ncclInvalidArgument, "wraps around");
    expect("Register(past the mapping)", ncclCommRegister(comm, buf, (size_t)1 << 40, &h), ncclInvalidArgument,
           "are not mapped");
    {
      ncclWindow_t w = NULL;
      float one = 1;
      expect("WindowRegister(SIZE_MAX)", ncclCommWindowRegister(comm, buf, (size_t)-1, &w, 0), ncclInvalidArgument,
             "not all memory of this process");
      expect("WindowRegister(1 TiB)", ncclCommWindowRegister(comm, buf, (size_t)1 << 40, &w, 0), ncclInvalidArgument,
             "are not mapped");
      expect("WindowRegister(text)", ncclCommWindowRegister(comm, (void*)&expect, 64, &w, 0), ncclInvalidArgument,
             "not for reading and writing");
      expect("WindowRegister", ncclCommWindowRegister(comm, buf, sizeof(buf), &w, 0), ncclSuccess, NULL);
      expect("PutSignal(offset 1 MiB)", ncclPutSignal(&one, 1, ncclFloat, 0, w, 1 << 20, 0, 0, 0, comm, NULL),
             ncclInvalidArgument, "do not fit");
      expect("PutSignal(offset 1 TiB)", ncclPutSignal(&one, 1, ncclFloat, 0, w, (size_t)1 << 40, 0, 0, 0, comm, NULL),
             ncclInvalidArgument, "do not fit");
      expect("WindowDeregister", ncclCommWindowDeregister(comm, w), ncclSuccess, NULL);
      expect("WindowRegister(size 0)", ncclCommWindowRegister(comm, buf, 0, &w, 0), ncclSuccess, NULL);
      expect("PutSignal(empty window)", ncclPutSignal(&one, 1, ncclFloat, 0, w, 0, 0, 0, 0, comm, NULL),
             ncclInvalidArgument, "do not fit");
      expect("WindowDeregister(empty)", ncclCommWindowDeregister(comm, w), ncclSuccess, NULL);
    }
    expect("SimulateEnd(NULL)", ncclGroupSimulateEnd(NULL), ncclInvalidArgument, "simInfo is NULL");
    sim.magic = 1;
    expect("SimulateEnd(bad magic)", ncclGroupSimulateEnd(&sim), ncclInvalidArgument, "NCCL_SIM_INFO_INITIALIZER");
    expect("Scalable(nId 0)", ncclCommInitRankScalable(&child, 1, 0, 0, &id, NULL), ncclInvalidArgument, "nId");
    expect("GetUniqueId(NULL comm)", ncclCommGetUniqueId(NULL, &id), ncclInvalidArgument, "ncclCommGetUniqueId");
  }
  expect("GroupEnd without start", ncclGroupEnd(), ncclInvalidUsage, "ncclGroupEnd");
  expect("MemAlloc(NULL)", ncclMemAlloc(NULL, 16), ncclInvalidArgument, "ncclMemAlloc");
  /* Refused up front: shared memory taken page by page would end in the OOM killer. */
  expect("MemAlloc(1 PiB)", ncclMemAlloc(&p, (size_t)1 << 50), ncclSystemError, "available memory");
  expect("MemAlloc", ncclMemAlloc(&p, 1000), ncclSuccess, NULL);
  if (!p || ((size_t)p & 4095)) { ++failed; printf("FAIL ncclMemAlloc alignment\n"); }
  expect("MemFree", ncclMemFree(p), ncclSuccess, NULL);

  expect("Finalize", ncclCommFinalize(comm), ncclSuccess, NULL);
  expect("Finalize twice", ncclCommFinalize(comm), ncclInvalidArgument, "already finalized");
  dead = comm;
  expect("Destroy", ncclCommDestroy(comm), ncclSuccess, NULL);
  expect("AllReduce(destroyed comm)", ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, dead, NULL), ncclInvalidArgument, "not a live");
  expect("Destroy(destroyed comm)", ncclCommDestroy(dead), ncclInvalidArgument, "not a live");
  expect("Destroy(NULL)", ncclCommDestroy(NULL), ncclSuccess, NULL);
  expect("Abort(NULL)", ncclCommAbort(NULL), ncclSuccess, NULL);
  if (strcmp(ncclGetErrorString((ncclResult_t)99), "unknown result code") != 0) { ++failed; printf("FAIL error string\n"); }

  /* ncclGetLastError is the process's last WARN (as NCCL's); acclGetThreadLastError this thread's. */
  expect("Bcast(root 7)", ncclBcast(buf, 4, ncclFloat, 7, NULL, NULL), ncclInvalidArgument, NULL);
  pthread_t t;
  pthread_create(&t, NULL, otherThreadWarns, NULL);
  pthread_join(t, NULL);
  if (!strstr(ncclGetLastError(NULL), "ncclCommCount") || !strstr(acclGetThreadLastError(), "ncclBcast")) {
    ++failed;
    printf("FAIL thread last error: process \"%s\", thread \"%s\"\n", ncclGetLastError(NULL), acclGetThreadLastError());
  } else {
    ++passed;
  }

  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
