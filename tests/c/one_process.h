/* For test programs whose ranks all live in this process, driven by one
 * thread: expect() counts checks (main prints "N passed, M failed"), and
 * groupedAllReduce() runs one int32 allreduce over n <= ONE_PROCESS_RANKS
 * communicators in a group (the group lets one thread's ranks meet), checked
 * exactly. */
#pragma once

#include <nccl.h>
#include <stdint.h>
#include <stdio.h>

#define ONE_PROCESS_RANKS 8
#define GROUPED_COUNT 100003

static int passed = 0, failed = 0;

static void expect(const char* what, int ok) {
  if (ok) ++passed;
  else { ++failed; printf("FAIL %s (%s)\n", what, ncclGetLastError(NULL)); }
}

static int groupedAllReduce(ncclComm_t* comms, int n) {
  static int32_t bufs[ONE_PROCESS_RANKS][GROUPED_COUNT];
  int r, i, bad = 0;
  if (n > ONE_PROCESS_RANKS) return 0;
  for (r = 0; r < n; ++r)
    for (i = 0; i < GROUPED_COUNT; ++i) bufs[r][i] = (r + 1) * (i % 101) - 50;
  if (ncclGroupStart() != ncclSuccess) return 0;
  for (r = 0; r < n; ++r)
    if (ncclAllReduce(bufs[r], bufs[r], GROUPED_COUNT, ncclInt32, ncclSum, comms[r], NULL) != ncclSuccess) return 0;
  if (ncclGroupEnd() != ncclSuccess) return 0;
  for (r = 0; r < n; ++r)
    for (i = 0; i < GROUPED_COUNT; ++i)
      if (bufs[r][i] != (n * (n + 1) / 2) * (i % 101) - 50 * n) ++bad;
  return bad == 0;
}
