#include "coll/primitives.h"

#include <cstring>

#include "base/check.h"
#include "transport/connection.h"

namespace accl {

Primitives::Primitives(ncclComm* comm, const char* opName, Connection* recv, Connection* send,
                       const Reducer* reducer, size_t elemSize)
    : steps_(comm, opName), recv_(recv), send_(send), red_(reducer), esize_(elemSize) {}

size_t Primitives::maxChunkBytes() const {
  size_t m = static_cast<size_t>(-1);
  if (recv_) m = recv_->fifo.slotBytes;
  if (send_ && send_->fifo.slotBytes < m) m = send_->fifo.slotBytes;
  return m;
}

ncclResult_t Primitives::send(const void* local, size_t bytes) {
  char* slot;
  NCCLCHECK(steps_.waitSend(send_, &slot));
  red_->prepare(slot, local, bytes / esize_, esize_);
  steps_.post(send_, bytes);
  return ncclSuccess;
}

ncclResult_t Primitives::sendCopy(const void* src, size_t bytes) {
  char* slot;
  NCCLCHECK(steps_.waitSend(send_, &slot));
  postCopy(slot, src, bytes);
  return ncclSuccess;
}

void Primitives::postCopy(char* slot, const void* from, size_t bytes) {
  if (steps_.postFrom(send_, from, bytes)) return;  // a socket sends it from where it is
  memcpy(slot, from, bytes);
  steps_.post(send_, bytes);
}

ncclResult_t Primitives::finish() { return steps_.waitAllSent(); }

ncclResult_t Primitives::recv(void* out, size_t bytes) {
  const char* data;
  NCCLCHECK(steps_.waitRecv(recv_, bytes, &data));
  memcpy(out, data, bytes);
  steps_.release(recv_);
  return ncclSuccess;
}

ncclResult_t Primitives::recvReduceSend(const void* local, size_t bytes) {
  const char* data;
  char* slot;
  NCCLCHECK(steps_.waitRecv(recv_, bytes, &data));
  NCCLCHECK(steps_.waitSend(send_, &slot));
  red_->combine(slot, data, local, bytes / esize_);
  steps_.post(send_, bytes);
  steps_.release(recv_);
  return ncclSuccess;
}

ncclResult_t Primitives::recvReduceCopySend(const void* local, void* out, size_t bytes) {
  const char* data;
  char* slot;
  NCCLCHECK(steps_.waitRecv(recv_, bytes, &data));
  NCCLCHECK(steps_.waitSend(send_, &slot));
  if (send_->sendsFromMemory()) {  // the result once, into out, which a socket sends from
    red_->combine(out, data, local, bytes / esize_);
    red_->finish(out, bytes / esize_);
    postCopy(slot, out, bytes);
  } else {
    red_->combineFinishCopy(out, slot, data, local, bytes / esize_, esize_);
    steps_.post(send_, bytes);
  }
  steps_.release(recv_);
  return ncclSuccess;
}

ncclResult_t Primitives::recvReduceCopy(const void* local, void* out, size_t bytes) {
  const char* data;
  NCCLCHECK(steps_.waitRecv(recv_, bytes, &data));
  red_->combine(out, data, local, bytes / esize_);
  red_->finish(out, bytes / esize_);
  steps_.release(recv_);
  return ncclSuccess;
}

ncclResult_t Primitives::recvCopySend(void* out, size_t bytes) {
  const char* data;
  char* slot;
  NCCLCHECK(steps_.waitRecv(recv_, bytes, &data));
  NCCLCHECK(steps_.waitSend(send_, &slot));
  if (out) {
    memcpy(out, data, bytes);
    postCopy(slot, out, bytes);
  } else {
    memcpy(slot, data, bytes);
    steps_.post(send_, bytes);
  }
  steps_.release(recv_);
  return ncclSuccess;
}

}  // namespace accl
