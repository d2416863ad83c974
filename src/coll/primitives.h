// The steps algorithms are made of, over one recv and one send Connection:
// each call moves one chunk (at most a slot) through the FIFOs, waiting with a
// deadline, the abort flag and peer liveness checks. A failed wait names this
// rank, the peer, the transport and the operation, marks the communicator
// failed and wakes its peers.
#pragma once

#include <cstddef>

#include "device/host_reduce.h"
#include "transport/connection.h"

struct ncclComm;

namespace accl {

class Primitives {
 public:
  Primitives(ncclComm* comm, const char* opName, Connection* recv, Connection* send, ReduceFn reduce,
             size_t elemSize);

  ncclResult_t send(const void* src, size_t bytes);
  ncclResult_t recv(void* dst, size_t bytes);
  // next <- reduce(prev's chunk, local)
  ncclResult_t recvReduceSend(const void* local, size_t bytes);
  // out <- reduce(prev's chunk, local); next <- out
  ncclResult_t recvReduceCopySend(const void* local, void* out, size_t bytes);
  // out <- prev's chunk; next <- prev's chunk
  ncclResult_t recvCopySend(void* out, size_t bytes);

  size_t maxChunkBytes() const;

 private:
  ncclResult_t waitRecv(size_t bytes, const char** data);
  ncclResult_t waitSend(char** slot);
  void postSend(size_t bytes);
  void releaseRecv();
  ncclResult_t fail(Connection* c, ncclResult_t err, const char* why);
  ncclResult_t checkWait(Connection* c, uint64_t* lastPeerCheck);

  ncclComm* comm_;
  const char* op_;
  Connection* recv_;
  Connection* send_;
  ReduceFn reduce_;
  size_t elemSize_ = 1;
};

}  // namespace accl
