/* fork() while another thread is inside the library: a thread checks (bad)
 * communicators without pause, each one taking the communicators' registry
 * and writing a WARN line, while the main thread forks children that make
 * the same calls and exit (some with ncclMemAlloc and ncclMemFree, or a
 * 1-rank communicator's init and destroy, which take locks of their own). A
 * child must never inherit a lock held by the checking thread, which it does
 * not have: that call would wait forever. The first forks race the thread's
 * first call, which sets the library up (a fork handler registered then ran
 * in only one half of a fork, and 58 of 100 runs of 20 forks hung).
 * `fork_while_checking [FORKS]`; prints "OK: N forks" or the fork that hung,
 * with the stacks of the child and of this process where gdb is installed. */
#define _GNU_SOURCE
#include <nccl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Every thread's stack in process `pid`, on stdout, if gdb is here. */
static void printStacks(pid_t pid) {
  char cmd[160];
  snprintf(cmd, sizeof cmd, "command -v gdb >/dev/null && gdb -p %d -batch -ex 'thread apply all bt' 2>&1", (int)pid);
  fflush(stdout);
  if (system(cmd) != 0) printf("(no stacks: gdb is not installed or could not attach)\n");
}

/* Step i of the checking thread, and what child i does: check a bad
 * communicator; every 4th, allocate and free shareable memory; every `init`th,
 * make a 1-rank communicator and destroy it (not more often: each leaves
 * sockets in TIME_WAIT). */
static int work(uintptr_t i, uintptr_t init) {
  int n, ok = ncclCommCount((ncclComm_t)(0x1000 + (i & 0xff0)), &n) == ncclInvalidArgument;
  if (i % 4 == 0) {
    void* p = NULL;
    ok = ok && ncclMemAlloc(&p, 8192) == ncclSuccess && ncclMemFree(p) == ncclSuccess;
  }
  if (i % init == 0) {
    ncclComm_t one;
    int dev = 0;
    ok = ok && ncclCommInitAll(&one, 1, &dev) == ncclSuccess && ncclCommDestroy(one) == ncclSuccess;
  }
  return ok;
}

static void* checker(void* arg) {
  (void)arg;
  for (uintptr_t i = 0; !stop; ++i) (void)work(i, 1024);
  return NULL;
}

int main(int argc, char** argv) {
  const int forks = argc > 1 ? atoi(argv[1]) : 500;
  pthread_t t;
  if (pthread_create(&t, NULL, checker, NULL) != 0) return 2;
  for (int i = 0; i < forks; ++i) {
    pid_t p = fork();
    if (p < 0) return 2;
    if (p == 0) _exit(work((uintptr_t)i, 8) ? 0 : 3);
    int status = 0;
    const struct timespec tick = {0, 1000 * 1000};
    /* A child's calls take milliseconds; a lock it inherited held never frees.
     * 20 s tells the two apart even on a machine that stalls for seconds. */
    const double start = seconds();
    while (waitpid(p, &status, WNOHANG) == 0) {
      if (seconds() - start > 20) {
        printf("FAILED: the child of fork %d hung in its first call (20 s); its stacks, then ours:\n", i);
        printStacks(p);
        printStacks(getpid());
        kill(p, SIGKILL);
        waitpid(p, &status, 0);
        stop = 1;
        pthread_join(t, NULL);
        return 1;
      }
      nanosleep(&tick, NULL);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      printf("FAILED: the child of fork %d exited with status %d\n", i, status);
      return 1;
    }
  }
  stop = 1;
  pthread_join(t, NULL);
  printf("OK: %d forks\n", forks);
  return 0;
}
