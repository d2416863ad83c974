/* Windows registered and deregistered inside a group (host memory): one thread
 * drives N ranks of ncclCommInitAll. Registration is collective, so it can only
 * finish at ncclGroupEnd, which sets every handle; two windows per rank in one
 * group keep their order (the second window is #1 on every rank). Every rank
 * then puts a block into the next rank's second window, and the waits and
 * bytes are checked; deregistration is grouped the same way (a window named
 * twice is refused at ncclGroupEnd). A put inside a group stays refused.
 * Prints "OK: N ranks". */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXR 8
#define BLOCK 4096

#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (!(cond)) {                                       \
      printf("FAILED: ");                                \
      printf(__VA_ARGS__);                               \
      printf(" (%s)\n", ncclGetLastError(NULL));         \
      exit(1);                                           \
    }                                                    \
  } while (0)

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2;
  CHECK(n >= 2 && n <= MAXR, "ranks: 2 to %d", MAXR);
  ncclComm_t comms[MAXR];
  CHECK(ncclCommInitAll(comms, n, NULL) == ncclSuccess, "ncclCommInitAll");
  float* first[MAXR];
  float* second[MAXR];
  ncclWindow_t w1[MAXR], w2[MAXR];
  for (int r = 0; r < n; ++r) {
    first[r] = malloc(BLOCK * sizeof(float));
    second[r] = calloc(BLOCK, sizeof(float));
    w1[r] = w2[r] = (ncclWindow_t)&w1;  /* must be replaced: set at ncclGroupEnd */
  }
  CHECK(ncclGroupStart() == ncclSuccess, "group start");
  for (int r = 0; r < n; ++r) {
    CHECK(ncclCommWindowRegister(comms[r], first[r], BLOCK * sizeof(float), &w1[r], 0) == ncclSuccess, "register");
    CHECK(w1[r] == NULL, "rank %d: a handle before ncclGroupEnd", r);
    CHECK(ncclCommWindowRegister(comms[r], second[r], BLOCK * sizeof(float), &w2[r], NCCL_WIN_COLL_SYMMETRIC) ==
              ncclSuccess, "register 2");
  }
  CHECK(ncclGroupEnd() == ncclSuccess, "group end (registration)");
  for (int r = 0; r < n; ++r) {
    CHECK(w1[r] && w2[r] && w1[r] != w2[r], "rank %d: handles not set by ncclGroupEnd", r);
    void* user = NULL;
    CHECK(ncclWinGetUserPtr(comms[r], w2[r], &user) == ncclSuccess && user == second[r],
          "rank %d: the second window is not the second buffer (order kept per communicator)", r);
  }

  float block[BLOCK];
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < BLOCK; ++i) block[i] = (float)(r * 10000 + i);
    CHECK(ncclPutSignal(block, BLOCK, ncclFloat, (r + 1) % n, w2[r], 0, 0, 0, 0, comms[r], NULL) == ncclSuccess,
          "rank %d: put", r);
  }
  for (int r = 0; r < n; ++r) {
    ncclWaitSignalDesc_t d = {1, (r + n - 1) % n, 0, 0};
    CHECK(ncclWaitSignal(1, &d, comms[r], NULL) == ncclSuccess, "rank %d: wait", r);
    int prev = (r + n - 1) % n;
    for (int i = 0; i < BLOCK; ++i)
      CHECK(second[r][i] == (float)(prev * 10000 + i), "rank %d: element %d is %g", r, i, second[r][i]);
  }

  CHECK(ncclGroupStart() == ncclSuccess, "group start");
  CHECK(ncclPutSignal(block, 1, ncclFloat, 1, w2[0], 0, 0, 0, 0, comms[0], NULL) == ncclInvalidUsage,
        "a put inside a group accepted");
  CHECK(ncclGroupEnd() == ncclSuccess, "group end");

  /* The second window twice: the repeat fails at ncclGroupEnd, after both windows went. */
  CHECK(ncclGroupStart() == ncclSuccess, "group start");
  for (int r = 0; r < n; ++r) {
    CHECK(ncclCommWindowDeregister(comms[r], w2[r]) == ncclSuccess, "deregister 2");
    CHECK(ncclCommWindowDeregister(comms[r], w1[r]) == ncclSuccess, "deregister");
    CHECK(ncclCommWindowDeregister(comms[r], w2[r]) == ncclSuccess, "deregister 2 again (queued)");
  }
  CHECK(ncclGroupEnd() == ncclInvalidUsage, "group end: a window deregistered twice accepted");
  for (int r = 0; r < n; ++r) {
    CHECK(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy");
    free(first[r]);
    free(second[r]);
  }
  printf("OK: %d ranks\n", n);
  return 0;
}
