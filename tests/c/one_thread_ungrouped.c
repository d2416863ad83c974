/* Two ranks of one process (ncclCommInitAll), driven from one thread
 * without ncclGroupStart/ncclGroupEnd: NCCL hangs there; ACCL fails the
 * first call that waits for the other rank, with ncclInvalidUsage and a WARN
 * saying to group the calls. Also the correct programs beside it, which must
 * not be refused: the same calls grouped, and a second thread that drives
 * rank 1 after a pause (argv[2] ms) while this thread waits in rank 0.
 *
 *   one_thread_ungrouped MODE [PAUSE_MS]
 *   MODE: allreduce COUNT | send BYTES | send_connected BYTES | grouped | two_threads
 * Prints "OK" and exits 0 when the program behaved as MODE expects. */
#define _GNU_SOURCE
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static ncclComm_t comms[2];
static float* bufs[2];
static size_t count;
static int pauseMs;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int exact(int rank) {  /* after a sum allreduce of (r + 1) * (i % 7) */
  size_t i;
  for (i = 0; i < count; ++i)
    if (bufs[rank][i] != (float)(3 * (i % 7))) return 0;
  return 1;
}

static void* rankOne(void* arg) {
  (void)arg;
  usleep(pauseMs * 1000);
  *(ncclResult_t*)arg = ncclAllReduce(bufs[1], bufs[1], count, ncclFloat32, ncclSum, comms[1], NULL);
  return NULL;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "allreduce";
  size_t i;
  int r;
  count = argc > 2 ? strtoul(argv[2], NULL, 0) : 1024;
  pauseMs = argc > 2 ? atoi(argv[2]) : 0;
  if (strcmp(mode, "two_threads") == 0) count = 1 << 20;
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) return 2;
  for (r = 0; r < 2; ++r) {
    bufs[r] = malloc((count > 1 ? count : 1) * sizeof(float) + (1 << 20));
    for (i = 0; i < count; ++i) bufs[r][i] = (float)((r + 1) * (i % 7));
  }
  if (strcmp(mode, "allreduce") == 0) {
    double t0 = now();
    ncclResult_t st = ncclAllReduce(bufs[0], bufs[0], count, ncclFloat32, ncclSum, comms[0], NULL);
    printf("ungrouped allreduce on rank 0: %s after %.3f s\n", ncclGetErrorString(st), now() - t0);
    if (st != ncclInvalidUsage) return 1;
  } else if (strcmp(mode, "send") == 0 || strcmp(mode, "send_connected") == 0) {
    size_t bytes = count;
    double t0;
    if (strcmp(mode, "send_connected") == 0) {  /* a grouped exchange first makes the connection */
      if (ncclGroupStart() != ncclSuccess || ncclSend(bufs[0], 1, ncclInt8, 1, comms[0], NULL) != ncclSuccess ||
          ncclRecv(bufs[1], 1, ncclInt8, 0, comms[1], NULL) != ncclSuccess || ncclGroupEnd() != ncclSuccess)
        return 1;
    }
    t0 = now();
    ncclResult_t st = ncclSend(bufs[0], bytes, ncclInt8, 1, comms[0], NULL);
    printf("ungrouped send of %zu bytes to rank 1: %s after %.3f s\n", bytes, ncclGetErrorString(st), now() - t0);
    if (st == ncclSuccess) {  /* it fit in the FIFO: the receive finds it, as NCCL's would on a GPU */
      st = ncclRecv(bufs[1], bytes, ncclInt8, 0, comms[1], NULL);
      if (st != ncclSuccess || memcmp(bufs[0], bufs[1], bytes) != 0) return 1;
      printf("the receive got it\n");
    } else if (st != ncclInvalidUsage) {
      return 1;
    }
  } else if (strcmp(mode, "grouped") == 0) {
    if (ncclGroupStart() != ncclSuccess) return 1;
    for (r = 0; r < 2; ++r)
      if (ncclAllReduce(bufs[r], bufs[r], count, ncclFloat32, ncclSum, comms[r], NULL) != ncclSuccess) return 1;
    if (ncclGroupEnd() != ncclSuccess || !exact(0) || !exact(1)) return 1;
  } else if (strcmp(mode, "two_threads") == 0) {
    pthread_t t;
    ncclResult_t other = ncclInternalError, st;
    if (pthread_create(&t, NULL, rankOne, &other) != 0) return 2;
    st = ncclAllReduce(bufs[0], bufs[0], count, ncclFloat32, ncclSum, comms[0], NULL);
    pthread_join(t, NULL);
    printf("rank 0: %s, rank 1 (after %d ms): %s\n", ncclGetErrorString(st), pauseMs, ncclGetErrorString(other));
    if (st != ncclSuccess || other != ncclSuccess || !exact(0) || !exact(1)) return 1;
  } else {
    return 2;
  }
  for (r = 0; r < 2; ++r) ncclCommDestroy(comms[r]);
  printf("OK\n");
  return 0;
}
