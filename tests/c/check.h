/* CHECK for the test programs of one process (rank_test.h has the per-rank
 * one): on failure, prints "FAILED: " with the message and the library's last
 * error, and exits 1. */
#pragma once

#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                         \
  do {                                           \
    if (!(cond)) {                               \
      printf("FAILED: " __VA_ARGS__);            \
      printf(" (%s)\n", ncclGetLastError(NULL)); \
      exit(1);                                   \
    }                                            \
  } while (0)
