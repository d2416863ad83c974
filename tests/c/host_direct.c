/* Direct collectives in host mode (coll/host_direct.h). `host_direct MODE N`:
 *   threads   N ranks as threads, malloc'd buffers in windows registered with
 *             NCCL_WIN_COLL_SYMMETRIC (one process: reached at their address)
 *   procs     N processes (rank 0 forks the others), ncclMemAlloc'd buffers in
 *             symmetric windows, which every rank maps
 *   private   processes; rank 1's window memory comes from malloc, so no rank
 *             can map it: the windows' collectives reach every buffer through
 *             cross memory attach instead
 *   plain     processes, malloc'd buffers and no windows: cross memory attach
 *   plainthreads  threads, malloc'd buffers and no windows
 *   forked    plain, but the parent used the library before it forked the
 *             ranks: each child is a process of its own all the same
 *   bounds    plain, but rank 1 sets ACCL_DIRECT_INLINE_BYTES=0 and
 *             ACCL_DIRECT_MIN_BYTES=4096: the ranks agree on the bounds at
 *             init (none inline, direct from 4096 bytes), so they agree on
 *             every call's path
 *   payloads  plain, but rank 0 sets ACCL_DIRECT_INLINE_BYTES=1000: the calls
 *             up to 1000 bytes run inline, and the slots' payloads are 1 KiB
 *             (rank 0's bound), not the default 8 KiB
 *   mixed     procs, but rank 1 calls on malloc'd buffers outside the windows:
 *             the others reach its buffers through cross memory attach, it
 *             reaches theirs through the mapped windows
 *   nocma     procs, but rank 1 runs with ACCL_CMA=0: the windows still run
 *             direct; after deregistration, the same buffers take the ring
 *   nodirect  procs, but rank 1 runs with ACCL_DIRECT=0: every rank takes the ring
 *   mismatch  processes; rank 1 passes another count: every rank fails with
 *             ncclInvalidUsage (the WARN names the rank)
 *   dtype     the same with another datatype of the same size (int32 for float)
 *   smallmismatch  mismatch with 100 floats (the inline path)
 *   tinymismatch   6 floats against 7: one rank's input in its description, the other's in the payloads
 *   kindmismatch   rank 1 calls a gather of 100 floats where the others call an all-to-all:
 *             they fail at once; rank 1 (a non-root, which reads no input) at its next call
 *   runahead  2 processes; rank 1 starts 1 s late: rank 0's broadcasts (root 0,
 *             4 floats in the description, then 64 in the payloads) return at once
 *             for 7 calls ahead of rank 1 and the 8th waits for it; rank 1 gets
 *             every call's own values
 *   unread    every rank broadcasts 4 floats with itself as the root, so no rank
 *             reads another's call and each returns; the allreduce after it fails
 *             with ncclInvalidUsage on every rank (the calls' signatures differ)
 *   skipped   rank 0 makes a broadcast (root 0) that the others do not, then all an
 *             allreduce on the ring and a broadcast: the others' fails with ncclInvalidUsage
 *   latefail  rank 1 calls an allreduce where the others broadcast (root 0): rank 1
 *             fails; the others' broadcast fails with ncclRemoteError naming rank 1,
 *             or if it looked first, their next one does (after a pause), though
 *             rank 0 reads no other rank
 *   abort     processes; rank 1 aborts its communicator and stays alive: the
 *             others' collective fails with ncclRemoteError in seconds
 *   destroy   the same with ncclCommDestroy
 *   dead      processes; rank 1 exits instead of calling the collective: the
 *             others fail with ncclRemoteError in seconds, not at ACCL_TIMEOUT
 *   late      2 processes, plain buffers; rank 1 (ACCL_TIMEOUT=1) times out
 *             waiting for rank 0, which calls 3 s late: rank 0 fails too and
 *             must not write into rank 1's output, which its caller owns again
 * All but the last eight run 300 small calls of every collective (most of them
 * inline), long runs of rooted calls, then every collective, in place and out of place, at
 * offsets inside the buffers, with sum, max, prod, avg and a PreMulSum whose
 * scalar differs by rank, checked element by element against exact integer
 * arithmetic; modes with windows then deregister them and run an allreduce
 * on the same buffers again. Prints "OK: N ranks" from rank 0, and before the
 * calls how large its mapping of the slots' segment is. */
#define _POSIX_C_SOURCE 200809L
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rank_test.h"

#define MAXR 8
#define COUNT 300007 /* per rank: 1.2 MB of floats, an odd tail after the vectors */
#define SKEW 16      /* elements: the buffers start this far inside the windows */

static ncclUniqueId id;
static int nranks;
static const char* mode;


/* Rank r's input at element i: small integers, so that every result is exact. */
static float in(int r, size_t i) { return (float)(r + 1 + (int)(i % 13)); }

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void fill(float* p, int rank, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = in(rank, i);
}

static void expectSum(int rank, const float* got, size_t n, size_t base, const char* what) {
  for (size_t i = 0; i < n; ++i) {
    float want = 0;
    for (int r = 0; r < nranks; ++r) want += in(r, base + i);
    CHECK(got[i] == want, "%s: element %zu is %g, want %g", what, i, got[i], want);
  }
}

static void collectives(int rank, ncclComm_t comm, float* sendWin, float* recvWin) {
  const size_t n = COUNT;
  float* send = sendWin + SKEW;
  float* recv = recvWin + SKEW;
  const size_t total = (size_t)nranks * n;

  /* AllReduce, out of place and in place. */
  fill(send, rank, n);
  CHECK(ncclAllReduce(send, recv, n, ncclFloat, ncclSum, comm, NULL) == ncclSuccess, "allreduce");
  expectSum(rank, recv, n, 0, "allreduce");
  fill(recv, rank, n);
  CHECK(ncclAllReduce(recv, recv, n, ncclFloat, ncclSum, comm, NULL) == ncclSuccess, "allreduce in place");
  expectSum(rank, recv, n, 0, "allreduce in place");

  /* Max and avg on int32; prod on int32 (values 1..3). */
  int* si = (int*)send;
  int* ri = (int*)recv;
  for (size_t i = 0; i < n; ++i) si[i] = (int)((rank * 7 + i) % 11);
  CHECK(ncclAllReduce(si, ri, n, ncclInt32, ncclMax, comm, NULL) == ncclSuccess, "max");
  for (size_t i = 0; i < n; ++i) {
    int want = 0;
    for (int r = 0; r < nranks; ++r) want = (int)((r * 7 + i) % 11) > want ? (int)((r * 7 + i) % 11) : want;
    CHECK(ri[i] == want, "max: element %zu is %d, want %d", i, ri[i], want);
  }
  for (size_t i = 0; i < n; ++i) si[i] = (int)(rank * 4 + (int)(i % 5)) * nranks;
  CHECK(ncclAllReduce(si, ri, n, ncclInt32, ncclAvg, comm, NULL) == ncclSuccess, "avg");
  for (size_t i = 0; i < n; ++i) {
    long s = 0;
    for (int r = 0; r < nranks; ++r) s += (long)(r * 4 + (int)(i % 5)) * nranks;
    CHECK(ri[i] == (int)(s / nranks), "avg: element %zu is %d, want %ld", i, ri[i], s / nranks);
  }
  for (size_t i = 0; i < n; ++i) si[i] = 1 + (int)((rank + i) % 3);
  CHECK(ncclReduce(si, ri, n, ncclInt32, ncclProd, nranks - 1, comm, NULL) == ncclSuccess, "reduce prod");
  if (rank == nranks - 1)
    for (size_t i = 0; i < n; ++i) {
      int want = 1;
      for (int r = 0; r < nranks; ++r) want *= 1 + (int)((r + i) % 3);
      CHECK(ri[i] == want, "reduce prod: element %zu is %d, want %d", i, ri[i], want);
    }

  /* PreMulSum: each rank scales its own input by rank + 1. */
  ncclRedOp_t pre;
  float scalar = (float)(rank + 1);
  CHECK(ncclRedOpCreatePreMulSum(&pre, &scalar, ncclFloat, ncclScalarHostImmediate, comm) == ncclSuccess, "premulsum");
  fill(send, rank, n);
  CHECK(ncclAllReduce(send, recv, n, ncclFloat, pre, comm, NULL) == ncclSuccess, "allreduce premulsum");
  for (size_t i = 0; i < n; ++i) {
    float want = 0;
    for (int r = 0; r < nranks; ++r) want += (float)(r + 1) * in(r, i);
    CHECK(recv[i] == want, "premulsum: element %zu is %g, want %g", i, recv[i], want);
  }
  CHECK(ncclRedOpDestroy(pre, comm) == ncclSuccess, "premulsum destroy");

  /* Broadcast from rank 1 % n, out of place then in place. */
  const int root = 1 % nranks;
  fill(send, rank, n);
  CHECK(ncclBroadcast(send, recv, n, ncclFloat, root, comm, NULL) == ncclSuccess, "broadcast");
  for (size_t i = 0; i < n; ++i) CHECK(recv[i] == in(root, i), "broadcast: element %zu", i);
  fill(recv, rank, n);
  CHECK(ncclBroadcast(recv, recv, n, ncclFloat, root, comm, NULL) == ncclSuccess, "broadcast in place");
  for (size_t i = 0; i < n; ++i) CHECK(recv[i] == in(root, i), "broadcast in place: element %zu", i);

  /* Reduce (sum) to rank 0, in place. */
  fill(recv, rank, n);
  CHECK(ncclReduce(recv, recv, n, ncclFloat, ncclSum, 0, comm, NULL) == ncclSuccess, "reduce");
  if (rank == 0) expectSum(rank, recv, n, 0, "reduce in place");

  /* AllGather, out of place and in place (rank r's block of the output). */
  fill(send, rank, n);
  CHECK(ncclAllGather(send, recv, n, ncclFloat, comm, NULL) == ncclSuccess, "allgather");
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < n; ++i) CHECK(recv[r * n + i] == in(r, i), "allgather: block %d element %zu", r, i);
  memset(recv, 0, total * sizeof(float));
  fill(recv + rank * n, rank, n);
  CHECK(ncclAllGather(recv + rank * n, recv, n, ncclFloat, comm, NULL) == ncclSuccess, "allgather in place");
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < n; ++i) CHECK(recv[r * n + i] == in(r, i), "allgather in place: block %d %zu", r, i);

  /* ReduceScatter, out of place and in place. */
  fill(send, rank, total);
  CHECK(ncclReduceScatter(send, recv, n, ncclFloat, ncclSum, comm, NULL) == ncclSuccess, "reducescatter");
  expectSum(rank, recv, n, rank * n, "reducescatter");
  fill(recv, rank, total);
  CHECK(ncclReduceScatter(recv, recv + rank * n, n, ncclFloat, ncclSum, comm, NULL) == ncclSuccess,
        "reducescatter in place");
  expectSum(rank, recv + rank * n, n, rank * n, "reducescatter in place");

  /* AllToAll, out of place and in place; Gather and Scatter to and from the
   * last rank (too large to run inline: sends and receives). */
  fill(send, rank, total);
  CHECK(ncclAlltoAll(send, recv, n, ncclFloat, comm, NULL) == ncclSuccess, "alltoall");
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < n; ++i) CHECK(recv[r * n + i] == in(r, rank * n + i), "alltoall: block %d %zu", r, i);
  fill(recv, rank, total);
  CHECK(ncclAlltoAll(recv, recv, n, ncclFloat, comm, NULL) == ncclSuccess, "alltoall in place");
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < n; ++i) CHECK(recv[r * n + i] == in(r, rank * n + i), "alltoall in place: %d %zu", r, i);
  fill(send, rank, total); /* rank 1 in place, the others not */
  fill(recv, rank, total);
  CHECK(ncclAlltoAll(rank == 1 ? recv : send, recv, n, ncclFloat, comm, NULL) == ncclSuccess, "alltoall, mixed");
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < n; ++i) CHECK(recv[r * n + i] == in(r, rank * n + i), "alltoall, mixed: %d %zu", r, i);
  const int last = nranks - 1;
  fill(send, rank, n);
  CHECK(ncclGather(send, recv, n, ncclFloat, last, comm, NULL) == ncclSuccess, "gather");
  for (int r = 0; rank == last && r < nranks; ++r)
    for (size_t i = 0; i < n; ++i) CHECK(recv[r * n + i] == in(r, i), "gather: block %d element %zu", r, i);
  fill(send, rank, total);
  CHECK(ncclScatter(send, recv, n, ncclFloat, last, comm, NULL) == ncclSuccess, "scatter");
  for (size_t i = 0; i < n; ++i) CHECK(recv[i] == in(last, rank * n + i), "scatter: element %zu", i);
}

static int is(const char* m) { return strcmp(mode, m) == 0; }

/* The bytes this process maps of the direct collectives' slots, or 0: the
 * shared memory segment named "/accl-<hash>-0-0-5" (5: kTagHostDirect). */
static size_t slotsMapped(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  size_t bytes = 0;
  unsigned long lo, hi;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, "/dev/shm/accl-") && strstr(line, "-0-0-5") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
      bytes = hi - lo;
  if (f) fclose(f);
  return bytes;
}

/* 300 small calls back to back, each with other values: most run inline
 * (their inputs carried in the slots' segment, no closing barrier), some on
 * the ring, so a rank that ran ahead must not disturb a call another rank is
 * still reading. The first 40 are every collective at 1 to 8 floats, around
 * the 24 bytes that travel in the call's description itself. Every result
 * checked exactly. */
static void smallCalls(int rank, ncclComm_t comm) {
  float* send = malloc(MAXR * 1024 * sizeof(float));
  float* recv = malloc(MAXR * 1024 * sizeof(float));
  for (int call = 0; call < 300; ++call) {
    const size_t n = call < 40 ? 1 + (size_t)call % 8 : 1 + (size_t)(call * 37) % 1000; /* up to 4000 bytes */
    const int root = call % nranks;
    for (size_t i = 0; i < (size_t)nranks * n; ++i) send[i] = (float)((rank + 1) * (call % 7 + 1) + (int)(i % 5));
    float want;
    switch (call % 8) {
      case 0:
        CHECK(ncclAllReduce(send, recv, n, ncclFloat, ncclSum, comm, NULL) == ncclSuccess, "small allreduce");
        for (size_t i = 0; i < n; ++i) {
          want = 0;
          for (int r = 0; r < nranks; ++r) want += (float)((r + 1) * (call % 7 + 1) + (int)(i % 5));
          CHECK(recv[i] == want, "small allreduce %d: element %zu is %g, want %g", call, i, recv[i], want);
        }
        break;
      case 1:
        CHECK(ncclBroadcast(send, send, n, ncclFloat, root, comm, NULL) == ncclSuccess, "small broadcast");
        for (size_t i = 0; i < n; ++i)
          CHECK(send[i] == (float)((root + 1) * (call % 7 + 1) + (int)(i % 5)), "small broadcast %d: %zu", call, i);
        break;
      case 2:
        CHECK(ncclReduce(send, recv, n, ncclFloat, ncclSum, root, comm, NULL) == ncclSuccess, "small reduce");
        for (size_t i = 0; rank == root && i < n; ++i)  /* a sum: every rank's input counts */
          CHECK(recv[i] == (float)(nranks * (nranks + 1) / 2 * (call % 7 + 1) + nranks * (int)(i % 5)),
                "small reduce %d: %zu", call, i);
        break;
      case 3:
        CHECK(ncclAllGather(send, recv, n, ncclFloat, comm, NULL) == ncclSuccess, "small allgather");
        for (int r = 0; r < nranks; ++r)
          for (size_t i = 0; i < n; ++i)
            CHECK(recv[r * n + i] == (float)((r + 1) * (call % 7 + 1) + (int)(i % 5)), "small allgather %d", call);
        break;
      case 5: /* rank 0 inside a group of its own: every rank still takes the same path */
        if (rank == 0) CHECK(ncclGroupStart() == ncclSuccess, "group start");
        CHECK(ncclAlltoAll(send, recv, n, ncclFloat, comm, NULL) == ncclSuccess, "small alltoall");
        if (rank == 0) CHECK(ncclGroupEnd() == ncclSuccess, "group end");
        for (int r = 0; r < nranks; ++r)  /* block `rank` of rank r's input */
          for (size_t i = 0; i < n; ++i)
            CHECK(recv[r * n + i] == (float)((r + 1) * (call % 7 + 1) + (int)((rank * n + i) % 5)),
                  "small alltoall %d: block %d element %zu", call, r, i);
        break;
      case 6:
        CHECK(ncclGather(send, recv, n, ncclFloat, root, comm, NULL) == ncclSuccess, "small gather");
        for (int r = 0; rank == root && r < nranks; ++r)
          for (size_t i = 0; i < n; ++i)
            CHECK(recv[r * n + i] == (float)((r + 1) * (call % 7 + 1) + (int)(i % 5)), "small gather %d", call);
        break;
      case 7:
        CHECK(ncclScatter(send, recv, n, ncclFloat, root, comm, NULL) == ncclSuccess, "small scatter");
        for (size_t i = 0; i < n; ++i)  /* block `rank` of the root's input */
          CHECK(recv[i] == (float)((root + 1) * (call % 7 + 1) + (int)((rank * n + i) % 5)), "small scatter %d", call);
        break;
      default:
        CHECK(ncclReduceScatter(send, recv, n, ncclFloat, ncclSum, comm, NULL) == ncclSuccess, "small rs");
        for (size_t i = 0; i < n; ++i) {
          want = 0;
          for (int r = 0; r < nranks; ++r) want += (float)((r + 1) * (call % 7 + 1) + (int)((rank * n + i) % 5));
          CHECK(recv[i] == want, "small reducescatter %d: element %zu is %g, want %g", call, i, recv[i], want);
        }
    }
  }
  free(send);
  free(recv);
}

/* Long runs of small rooted calls, each call with other values, every result
 * checked: 400 of each kind with root 0, where the same rank reads every
 * call's inputs (a gather's or reduce's root) or its input is read by all (a
 * broadcast's or scatter's), then 400 whose kind and root change every call.
 * Inline, a rank that reads no other rank's input runs up to 7 calls ahead:
 * it must not overwrite an input not yet read. */
static void rootedRuns(int rank, ncclComm_t comm) {
  float send[4 * MAXR], recv[4 * MAXR];
  const size_t n = 4;
  for (int pass = 0; pass < 5; ++pass)
    for (int call = 0; call < 400; ++call) {
      /* The last pass: every kind with every root in turn (call / 4, not call,
       * picks the root, so that 2 or 4 ranks do not pin a root to a kind). */
      const int kind = pass < 4 ? pass : call % 4, root = pass < 4 ? 0 : (call / 4 + call) % nranks;
      for (size_t i = 0; i < (size_t)nranks * n; ++i) send[i] = (float)(rank * 1000 + call * 7 + (int)i);
      switch (kind) {
        case 0:
          CHECK(ncclGather(send, recv, n, ncclFloat, root, comm, NULL) == ncclSuccess, "gather run");
          for (size_t i = 0; rank == root && i < (size_t)nranks * n; ++i)
            CHECK(recv[i] == (float)((int)(i / n) * 1000 + call * 7 + (int)(i % n)), "gather run %d: %zu", call, i);
          break;
        case 1:
          CHECK(ncclReduce(send, recv, n, ncclFloat, ncclSum, root, comm, NULL) == ncclSuccess, "reduce run");
          for (size_t i = 0; rank == root && i < n; ++i)
            CHECK(recv[i] == (float)(1000 * nranks * (nranks - 1) / 2 + nranks * (call * 7 + (int)i)),
                  "reduce run %d: %zu", call, i);
          break;
        case 2:
          CHECK(ncclBroadcast(send, recv, n, ncclFloat, root, comm, NULL) == ncclSuccess, "broadcast run");
          for (size_t i = 0; i < n; ++i)
            CHECK(recv[i] == (float)(root * 1000 + call * 7 + (int)i), "broadcast run %d: %zu", call, i);
          break;
        default:
          CHECK(ncclScatter(send, recv, n, ncclFloat, root, comm, NULL) == ncclSuccess, "scatter run");
          for (size_t i = 0; i < n; ++i)
            CHECK(recv[i] == (float)(root * 1000 + call * 7 + (int)(rank * n + i)), "scatter run %d: %zu", call, i);
      }
    }
}

static void* runRank(void* arg) {
  int rank = (int)(long)arg;
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, nranks, id, rank) == ncclSuccess, "init");
  const int threads = is("threads") || is("plainthreads");
  const int windows = !is("plain") && !is("plainthreads") && !is("forked") && !is("late") && !is("bounds") &&
                      !is("payloads");
  const int shareable = !threads && windows && !(is("private") && rank == 1);
  const size_t bytes = ((size_t)nranks * COUNT + SKEW) * sizeof(float);
  float *sendWin, *recvWin;
  if (shareable) {
    CHECK(ncclMemAlloc((void**)&sendWin, bytes) == ncclSuccess, "ncclMemAlloc");
    CHECK(ncclMemAlloc((void**)&recvWin, bytes) == ncclSuccess, "ncclMemAlloc");
  } else {
    sendWin = malloc(bytes);
    recvWin = malloc(bytes);
  }
  ncclWindow_t ws, wr;
  if (windows) {
    CHECK(ncclCommWindowRegister(comm, sendWin, bytes, &ws, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, "register");
    CHECK(ncclCommWindowRegister(comm, recvWin, bytes, &wr, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, "register");
  }

  if (is("kindmismatch")) { /* 100 floats each way: inline */
    fill(sendWin, rank, (size_t)nranks * 100);
    ncclResult_t r = rank == 1 ? ncclGather(sendWin, recvWin, 100, ncclFloat, 0, comm, NULL)
                               : ncclAlltoAll(sendWin, recvWin, 100, ncclFloat, comm, NULL);
    if (rank != 1) {
      CHECK(r == ncclInvalidUsage, "an alltoall against rank 1's gather gave %d, not ncclInvalidUsage", r);
    } else {
      /* A gather's non-root reads no other rank's input: it returns, or fails
       * if the others already stopped; else its next call fails. */
      CHECK(r == ncclSuccess || r == ncclRemoteError, "the mismatched gather gave %d", r);
      if (r == ncclSuccess) {
        r = ncclAllReduce(sendWin, recvWin, 100, ncclFloat, ncclSum, comm, NULL);
        CHECK(r == ncclRemoteError, "the call after a mismatched gather gave %d, not ncclRemoteError", r);
      }
    }
    ncclCommAbort(comm);
    return NULL;
  }
  if (is("runahead")) {
    const struct timespec late = {1, 0};
    for (int count = 4; count <= 64; count *= 16) { /* 16 and 256 bytes: description, then payload */
      if (rank == 1) nanosleep(&late, NULL);
      for (int call = 0; call < 12; ++call) {
        for (int i = 0; i < count; ++i) sendWin[i] = (float)(call * 1000 + i);
        const double t0 = now();
        CHECK(ncclBroadcast(sendWin, recvWin, count, ncclFloat, 0, comm, NULL) == ncclSuccess, "broadcast %d", call);
        const double took = now() - t0;
        /* A rank publishes call c once every rank finished c - 8: the root's
         * first 8 calls (0-7) need nobody, its 9th waits for rank 1. */
        if (rank == 0 && call < 8) CHECK(took < 0.3, "the root's call %d waited %.2f s for nothing", call, took);
        if (rank == 0 && call == 8) CHECK(took > 0.5, "the root's call 8 ran %.2f s after rank 1's call 0", took);
        if (rank == 1)
          for (int i = 0; i < count; ++i)
            CHECK(recvWin[i] == (float)(call * 1000 + i), "call %d: element %d is %g", call, i, recvWin[i]);
      }
    }
    ncclCommAbort(comm);
    return NULL;
  }
  if (is("unread")) { /* 4 floats: in the descriptions */
    fill(sendWin, rank, 4);
    CHECK(ncclBroadcast(sendWin, recvWin, 4, ncclFloat, rank, comm, NULL) == ncclSuccess,
          "a broadcast that only its own rank roots should return (no rank reads another)");
    ncclResult_t r = ncclAllReduce(sendWin, recvWin, 4, ncclFloat, ncclSum, comm, NULL);
    CHECK(r == ncclInvalidUsage, "the allreduce after broadcasts with different roots gave %d, not ncclInvalidUsage",
          r);
    ncclCommAbort(comm);
    return NULL;
  }
  if (is("skipped")) {
    float* big = malloc(64 << 10); /* 64 KiB: above the inline bound, below the direct one: the ring */
    CHECK(big != NULL, "malloc");
    fill(big, rank, 16 << 10);
    fill(sendWin, rank, 4);
    if (rank == 0)
      CHECK(ncclBroadcast(sendWin, recvWin, 4, ncclFloat, 0, comm, NULL) == ncclSuccess, "the extra broadcast");
    CHECK(ncclAllReduce(big, big, 16 << 10, ncclFloat, ncclSum, comm, NULL) == ncclSuccess, "the ring allreduce");
    ncclResult_t r = ncclBroadcast(sendWin, recvWin, 4, ncclFloat, 0, comm, NULL);
    if (rank != 0) CHECK(r == ncclInvalidUsage, "rank %d's broadcast after a call rank 0 made alone gave %d", rank, r);
    else CHECK(r == ncclSuccess || r == ncclRemoteError, "rank 0's broadcast gave %d", r);
    free(big);
    ncclCommAbort(comm);
    return NULL;
  }
  if (is("latefail")) {
    fill(sendWin, rank, 100);
    ncclResult_t r = rank == 1 ? ncclAllReduce(sendWin, recvWin, 100, ncclFloat, ncclSum, comm, NULL)
                               : ncclBroadcast(sendWin, recvWin, 100, ncclFloat, 0, comm, NULL);
    if (rank == 1) {
      CHECK(r == ncclInvalidUsage, "an allreduce against broadcasts gave %d", r);
    } else if (r == ncclSuccess) { /* it looked before rank 1 failed: its next call sees it */
      const struct timespec pause = {0, 300 * 1000 * 1000};
      nanosleep(&pause, NULL); /* rank 1's failure is in its slot by now */
      r = ncclBroadcast(sendWin, recvWin, 100, ncclFloat, 0, comm, NULL);
      CHECK(r == ncclRemoteError, "rank %d's broadcast after rank 1 failed gave %d", rank, r);
    } else {
      CHECK(r == ncclRemoteError, "rank %d's broadcast beside rank 1's failed allreduce gave %d", rank, r);
    }
    ncclCommAbort(comm);
    return NULL;
  }
  if (is("mismatch") || is("dtype") || is("smallmismatch") || is("tinymismatch")) {
    fill(sendWin, rank, COUNT);
    const int odd = rank == 1 && !is("dtype");
    const ncclDataType_t type = rank == 1 && is("dtype") ? ncclInt32 : ncclFloat;
    const size_t count = is("smallmismatch") ? 100 : is("tinymismatch") ? 6 : COUNT; /* 400 and 24 bytes: inline */
    ncclResult_t r = ncclAllReduce(sendWin, recvWin, count + odd, type, ncclSum, comm, NULL);
    CHECK(r == ncclInvalidUsage, "a call that differs on rank 1 gave %d, not ncclInvalidUsage", r);
    ncclCommAbort(comm);
    return NULL;
  }
  if (is("late")) {  /* 2 ranks, plain buffers of 4 MB: direct, through cross memory attach */
    const size_t count = 1 << 20;
    float* send = malloc(count * sizeof(float));
    float* recv = malloc(count * sizeof(float));
    fill(send, rank, count);
    if (rank == 0) {
      sleep(3);
      ncclResult_t r = ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, NULL);
      CHECK(r == ncclRemoteError, "the late rank's allreduce gave %d, not ncclRemoteError", r);
    } else {
      ncclResult_t r = ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, NULL);
      CHECK(r == ncclTimeout, "waiting for the late rank gave %d, not ncclTimeout", r);
      for (size_t i = 0; i < count; ++i) recv[i] = -1; /* the caller owns its output again */
      sleep(5);
      for (size_t i = 0; i < count; ++i)
        CHECK(recv[i] == -1, "element %zu of the output changed after the failed call returned", i);
      printf("OK: the late rank left the output alone\n");
    }
    ncclCommAbort(comm);
    free(send);
    free(recv);
    return NULL;
  }
  if (is("dead") || is("abort") || is("destroy")) {
    if (rank == 1 && is("dead")) _exit(0);  /* before the collective: the others wait for it */
    if (rank == 1) {  /* stops its slot, and stays alive past the others' wait */
      CHECK((is("abort") ? ncclCommAbort(comm) : ncclCommDestroy(comm)) == ncclSuccess, "abort or destroy");
      sleep(8);
      return NULL;
    }
    fill(sendWin, rank, COUNT);
    double t0 = now();
    ncclResult_t r = ncclAllReduce(sendWin, recvWin, COUNT, ncclFloat, ncclSum, comm, NULL);
    double waited = now() - t0;
    CHECK(r == ncclRemoteError, "waiting for a dead rank gave %d, not ncclRemoteError", r);
    CHECK(waited < 20, "the dead rank was seen after %.1f s", waited);
    if (rank == 0) printf("OK: %s rank seen after %.2f s\n", mode, waited);
    ncclCommAbort(comm);
    return NULL;
  }

  if (rank == 0) printf("rank 0 maps %zu bytes of slots\n", slotsMapped());
  smallCalls(rank, comm);
  rootedRuns(rank, comm);
  if (is("mixed") && rank == 1) {  /* its buffers of the calls lie outside the windows */
    float* send = malloc(bytes);
    float* recv = malloc(bytes);
    collectives(rank, comm, send, recv);
    free(send);
    free(recv);
  } else {
    collectives(rank, comm, sendWin, recvWin);
  }
  if (windows) {
    CHECK(ncclCommWindowDeregister(comm, ws) == ncclSuccess, "deregister");
    CHECK(ncclCommWindowDeregister(comm, wr) == ncclSuccess, "deregister");
    fill(sendWin + SKEW, rank, COUNT);  /* the same buffers, now outside any window */
    CHECK(ncclAllReduce(sendWin + SKEW, recvWin + SKEW, COUNT, ncclFloat, ncclSum, comm, NULL) == ncclSuccess,
          "allreduce after deregistration");
    expectSum(rank, recvWin + SKEW, COUNT, 0, "allreduce after deregistration");
  }
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  if (shareable) {
    CHECK(ncclMemFree(sendWin) == ncclSuccess && ncclMemFree(recvWin) == ncclSuccess, "ncclMemFree");
  } else {
    free(sendWin);
    free(recvWin);
  }
  return NULL;
}

static void noDirectOnRank1(int r) {
  if (r == 1) setenv("ACCL_DIRECT", "0", 1); /* before the library reads its parameters */
}

static void noCmaOnRank1(int r) {
  if (r == 1) setenv("ACCL_CMA", "0", 1);
}

static void otherBoundsOnRank1(int r) {
  if (r == 1) {
    setenv("ACCL_DIRECT_INLINE_BYTES", "0", 1);
    setenv("ACCL_DIRECT_MIN_BYTES", "4096", 1);
  }
}

static void smallPayloadsOnRank0(int r) {
  if (r == 0) setenv("ACCL_DIRECT_INLINE_BYTES", "1000", 1);
}

static void shortTimeoutOnRank1(int r) {
  if (r == 1) setenv("ACCL_TIMEOUT", "1", 1);
}

int main(int argc, char** argv) {
  int rank = 0;
  CHECK(argc == 3 && atoi(argv[2]) >= 2 && atoi(argv[2]) <= MAXR, "usage: host_direct MODE N (2 <= N <= %d)", MAXR);
  mode = argv[1];
  nranks = atoi(argv[2]);
  if (is("threads") || is("plainthreads")) {
    CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
    pthread_t t[MAXR];
    for (long r = 0; r < nranks; ++r) pthread_create(&t[r], NULL, runRank, (void*)r);
    for (int r = 0; r < nranks; ++r) pthread_join(t[r], NULL);
  } else {
    if (is("forked")) {  /* the library's per-process state exists before the fork */
      ncclComm_t one;
      int dev = 0;
      CHECK(ncclCommInitAll(&one, 1, &dev) == ncclSuccess && ncclCommDestroy(one) == ncclSuccess, "a 1-rank comm");
    }
    CHECK(forkRanks(nranks, &id, runRank, is("nodirect") ? noDirectOnRank1 : is("nocma") ? noCmaOnRank1 : is("late") ? shortTimeoutOnRank1
                                   : is("bounds") ? otherBoundsOnRank1 : is("payloads") ? smallPayloadsOnRank0 : NULL) == 0,
          "a rank failed");
  }
  printf("OK: %d ranks\n", nranks);
  return 0;
}
