/* The network transport's control line must not overtake the data: rank 0
 * (its own host) sends 10 slots' worth to rank 1 and then aborts; rank 1
 * sleeps first, so that its FIFO is full and the last messages still wait in
 * the backend when rank 0's abort frame comes. Rank 1's receive must still
 * get every byte (the abort takes effect after the messages sent before it),
 * and its next call must fail naming rank 0. Prints "OK" from rank 1. */
#define _DEFAULT_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rank_test.h"

#define SLOT (128 * 1024)
#define BYTES (10 * SLOT)

static ncclUniqueId id;

static void ownHost(int r) {
  char host[32];
  snprintf(host, sizeof host, "host%d", r);
  setenv("NCCL_HOSTID", host, 1);
  setenv("NCCL_BUFFSIZE", "1048576", 1); /* 8 slots of 128 KiB */
}

static void* body(void* arg) {
  const int rank = (int)(long)arg;
  ncclComm_t comm;
  static unsigned char buf[BYTES];
  CHECK(ncclCommInitRank(&comm, 2, id, rank) == ncclSuccess, "init");
  if (rank == 0) {
    for (int i = 0; i < BYTES; ++i) buf[i] = (unsigned char)(i * 7 + 3);
    CHECK(ncclSend(buf, BYTES, ncclUint8, 1, comm, NULL) == ncclSuccess, "send");
    ncclCommAbort(comm);
    return NULL;
  }
  sleep(1); /* rank 0 has sent everything and aborted by now */
  CHECK(ncclRecv(buf, BYTES, ncclUint8, 0, comm, NULL) == ncclSuccess, "the receive after the abort frame");
  for (int i = 0; i < BYTES; ++i) CHECK(buf[i] == (unsigned char)(i * 7 + 3), "byte %d", i);
  const ncclResult_t r = ncclRecv(buf, 1, ncclUint8, 0, comm, NULL);
  CHECK(r != ncclSuccess, "a receive after the sender aborted succeeded");
  CHECK(strstr(ncclGetLastError(NULL), "rank 0") != NULL, "the error names rank 0: %s", ncclGetLastError(NULL));
  ncclCommAbort(comm);
  printf("OK\n");
  return NULL;
}

int main(void) { return forkRanks(2, &id, body, ownHost); }
