// Ring steps over one recv and one send connection: each call moves one
// chunk (at most a slot) and applies the collective's Reducer where it reduces.
#pragma once

#include <cstddef>

#include "coll/steps.h"
#include "device/host_reduce.h"

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

  size_t maxChunkBytes() const;

 private:
  Steps steps_;
  Connection* recv_;
  Connection* send_;
  const Reducer* red_;
  size_t esize_;
};

}  // namespace accl
