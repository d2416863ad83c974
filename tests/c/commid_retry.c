/* Under NCCL_COMM_ID, rank 0's init hosts the root on the fixed address. An
 * init that ends without its peers (aborted here: rank 1 never comes) must
 * leave that address free, so that the program can retry at once; before, the
 * root listened on until ACCL_TIMEOUT and the retry's listen failed.
 * `commid_retry` (NCCL_COMM_ID set); prints "OK". */
#define _DEFAULT_SOURCE
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "check.h"

static ncclUniqueId id;
static ncclComm_t volatile handed;
static ncclResult_t initResult;

static void* initRank0Of2(void* arg) {
  (void)arg;
  initResult = ncclCommInitRank((ncclComm_t*)&handed, 2, id, 0);
  return NULL;
}

int main(void) {
  CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
  pthread_t t;
  pthread_create(&t, NULL, initRank0Of2, NULL);
  while (!handed) usleep(1000);
  usleep(300 * 1000); /* waiting at its root for rank 1 */
  CHECK(ncclCommAbort(handed) == ncclSuccess, "abort");
  pthread_join(t, NULL);
  CHECK(initResult != ncclSuccess, "the aborted init succeeded");

  ncclComm_t one;
  CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId again");
  CHECK(ncclCommInitRank(&one, 1, id, 0) == ncclSuccess, "the retry on the same NCCL_COMM_ID");
  static float x[4] = {1, 2, 3, 4};
  CHECK(ncclAllReduce(x, x, 4, ncclFloat, ncclSum, one, NULL) == ncclSuccess && x[3] == 4, "allreduce");
  CHECK(ncclCommDestroy(one) == ncclSuccess, "destroy");
  printf("OK\n");
  return 0;
}
