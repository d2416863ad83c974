// Ring steps over one recv and one send connection: each call moves one
// chunk (at most a slot) and applies the collective's Reducer where it reduces.
// A chunk that leaves unchanged from the caller's buffers (sendCopy, and the
// outputs of recvCopySend and recvReduceCopySend) goes out from there over a
// socket, with no copy into the slot: those bytes must stay as they are until
// finish(), which every collective calls before it returns.
#pragma once

#include <cstddef>

#include "coll/steps.h"
#include "device/host_reduce.h"
#include "transport/connection.h"

namespace accl {

class Primitives {
 public:
  Primitives(ncclComm* comm, const char* opName, Connection* recv, Connection* send, const Reducer* reducer,
             size_t elemSize);

  // next <- prepare(local)
  ncclResult_t send(const void* local, size_t bytes);
  // next <- src, unchanged (broadcast, allgather)
  ncclResult_t sendCopy(const void* src, size_t bytes);
  // out <- prev's chunk
  ncclResult_t recv(void* out, size_t bytes);
  // next <- combine(prev's chunk, local)
  ncclResult_t recvReduceSend(const void* local, size_t bytes);
  // out <- finish(combine(prev's chunk, local)); next <- out
  ncclResult_t recvReduceCopySend(const void* local, void* out, size_t bytes);
  // out <- finish(combine(prev's chunk, local))
  ncclResult_t recvReduceCopy(const void* local, void* out, size_t bytes);
  // out <- prev's chunk; next <- prev's chunk
  ncclResult_t recvCopySend(void* out, size_t bytes);

  // Until every chunk sent from the caller's buffers has left.
  ncclResult_t finish();

  size_t maxChunkBytes() const;

 private:
  // next <- `from`: posted from there where the connection sends from memory,
  // else copied into `slot` (the next free one) and posted.
  void postCopy(char* slot, const void* from, size_t bytes);
  Steps steps_;
  Connection* recv_;
  Connection* send_;
  const Reducer* red_;
  size_t esize_;
};

}  // namespace accl
