/* ncclCommAbort of a communicator whose init has not finished, from another
 * thread or before the group that runs the init ends. `abort_during_init MODE`:
 *   blocking  a thread runs a blocking ncclCommInitRank of rank 0 of 2 (rank 1
 *             never comes); the main thread aborts the communicator as soon as
 *             the init has handed it out: the abort returns at once and the
 *             init fails, with nothing freed twice or used after its free
 *   group     ncclCommInitRank of rank 0 of 2 queued in a group, aborted before
 *             ncclGroupEnd, which must not run the init on the freed
 *             communicator and fails
 * Run under valgrind (tests/native/test_memcheck.py) a use after free shows.
 * Prints "OK: MODE". */
#define _DEFAULT_SOURCE
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(cond, ...)         \
  do {                           \
    if (!(cond)) {               \
      printf("FAILED: ");        \
      printf(__VA_ARGS__);       \
      printf("\n");              \
      exit(1);                   \
    }                            \
  } while (0)

static ncclUniqueId id;
static ncclComm_t volatile handed; /* the blocking init's communicator, once handed out */
static ncclResult_t initResult;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void* blockingInit(void* arg) {
  (void)arg;
  initResult = ncclCommInitRank((ncclComm_t*)&handed, 2, id, 0);
  return NULL;
}

int main(int argc, char** argv) {
  CHECK(argc == 2, "usage: abort_during_init blocking|group");
  CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
  if (strcmp(argv[1], "blocking") == 0) {
    pthread_t t;
    pthread_create(&t, NULL, blockingInit, NULL);
    while (!handed) usleep(1000);
    usleep(200 * 1000); /* inside the init, waiting for rank 1 */
    const double t0 = now();
    CHECK(ncclCommAbort(handed) == ncclSuccess, "abort");
    const double took = now() - t0;
    pthread_join(t, NULL);
    CHECK(took < 5, "the abort took %.1f s", took);
    CHECK(initResult != ncclSuccess && initResult != ncclInProgress, "the aborted init returned %d", initResult);
  } else {
    ncclComm_t comm = NULL;
    CHECK(ncclGroupStart() == ncclSuccess, "group start");
    CHECK(ncclCommInitRank(&comm, 2, id, 0) == ncclSuccess && comm, "queued init");
    CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
    const ncclResult_t r = ncclGroupEnd();
    CHECK(r != ncclSuccess && r != ncclInProgress, "the group of the aborted init returned %d", r);
  }
  printf("OK: %s\n", argv[1]);
  return 0;
}
