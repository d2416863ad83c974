/* Helpers of the multi-rank C tests (tests/c, one translation unit each).
 *
 * CHECK(cond, fmt, ...): on failure prints "FAILED rank R: <message> (<the
 * library's last error>)" and exits 1; needs an int `rank` in scope.
 *
 * forkRanks runs body(rank) in `nranks` processes: rank 0 (this process) forks the
 * others before any NCCL call, makes the unique id and sends it to each child
 * through a pipe; every process calls before(rank) first (may be NULL), e.g.
 * to set its own NCCL_HOSTID. Returns 0 once every child exited with status 0,
 * else prints which did not and returns 1. For tests/c programs only. */
#pragma once

#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORK_RANKS_MAX 16

#define CHECK(cond, ...)                          \
  do {                                            \
    if (!(cond)) {                                \
      printf("FAILED rank %d: ", rank);           \
      printf(__VA_ARGS__);                        \
      printf(" (%s)\n", ncclGetLastError(NULL)); \
      fflush(stdout);                             \
      exit(1);                                    \
    }                                             \
  } while (0)

static int forkRanks(int nranks, ncclUniqueId* id, void* (*body)(void*), void (*before)(int)) {
  pid_t kids[FORK_RANKS_MAX];
  int pipes[FORK_RANKS_MAX][2];
  for (int r = 1; r < nranks; ++r) {
    if (pipe(pipes[r]) != 0) return 1;
    kids[r] = fork();
    if (kids[r] == 0) {
      if (before) before(r);
      if (read(pipes[r][0], id, sizeof *id) != (ssize_t)sizeof *id) _exit(2);
      body((void*)(long)r);
      fflush(stdout);
      _exit(0);
    }
  }
  if (before) before(0);
  if (ncclGetUniqueId(id) != ncclSuccess) return 1;
  for (int r = 1; r < nranks; ++r)
    if (write(pipes[r][1], id, sizeof *id) != (ssize_t)sizeof *id) return 1;
  body((void*)0L);
  int bad = 0;
  for (int r = 1; r < nranks; ++r) {
    int status = 0;
    waitpid(kids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      printf("FAILED: rank %d exited with status %d\n", r, status);
      bad = 1;
    }
  }
  return bad;
}
