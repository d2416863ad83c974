// All-to-all, gather and scatter as NCCL defines them: groups of sends and
// receives. Small calls of ranks on one host run inline instead
// (coll/host_direct.h); every other call becomes the sends and receives here.
#include <cstdlib>
#include <cstring>

#include "base/check.h"
#include "coll/coll.h"
#include "base/check.h"
#include "core/comm.h"
#include "coll/dev_comm.h"

namespace accl {
namespace {

// The host copy of an in-place all-to-all's input, but for block `skip` (the
// rank's own when the buffers coincide: it stays where it is). The communicator
// keeps the buffer and reuses it once no running operation holds it any more
// (use_count 1): a fresh allocation on every call faulted in every page, which
// made the call three times slower than out of place.
ncclResult_t hostStagingCopy(ncclComm* comm, const void* src, size_t block, int skip, std::shared_ptr<void>* out) {
  const size_t bytes = block * comm->nranks;
  if (!comm->alltoallStaging || comm->alltoallStaging.use_count() > 1 || comm->alltoallStagingBytes < bytes) {
    comm->alltoallStaging.reset();
    comm->alltoallStaging.reset(malloc(bytes), free);
    comm->alltoallStagingBytes = comm->alltoallStaging ? bytes : 0;
    if (!comm->alltoallStaging) {
      WARN("ncclAlltoAll (%s, rank %d): cannot allocate %zu bytes to stage an in-place all-to-all",
           comm->name.c_str(), comm->rank, bytes);
      return ncclSystemError;
    }
  }
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(comm->alltoallStaging.get());
  const size_t head = skip < 0 ? bytes : block * skip, tail = skip < 0 ? bytes : head + block;
  memcpy(to, from, head);
  memcpy(to + tail, from + tail, bytes - tail);
  *out = comm->alltoallStaging;
  return ncclSuccess;
}

CollArgs sendRecv(const CollArgs& a, CollKind kind, int peer, const void* send, void* recv) {
  CollArgs o = a;
  o.kind = kind;
  o.root = peer;
  o.sendbuff = send;
  o.recvbuff = recv;
  return o;
}

}  // namespace

ncclResult_t asSendRecv(const CollArgs& a, std::vector<CollArgs>* ops) {
  ncclComm* comm = a.comm;
  const int n = comm->nranks, me = comm->rank;
  const size_t block = a.count * typeSize(a.type);
  const char* send = static_cast<const char*>(a.sendbuff);
  char* recv = static_cast<char*>(a.recvbuff);
  ops->clear();
  switch (a.kind) {
    case CollKind::AllToAll: {
      std::shared_ptr<void> keep;
      const bool inPlace = rangesOverlap(send, block * n, recv, block * n);
      // Host buffers send from a copy, made now (when the call runs). Device
      // sends that overlap their receives are copied when the group's sends
      // and receives are queued (devRunP2p), after the group's earlier work:
      // a copy queued now, when the call is made inside a group, would read
      // the buffer before that work wrote it.
      if (inPlace && !a.onDevice) {
        NCCLCHECK(hostStagingCopy(comm, send, block, send == recv ? me : -1, &keep));
        send = static_cast<const char*>(keep.get());
      }
      for (int r = 0; r < n; ++r) {
        if (inPlace && r == me && a.sendbuff == a.recvbuff) continue;  // its own block is already in place
        ops->push_back(sendRecv(a, CollKind::Send, r, send + r * block, nullptr));
        ops->back().keep = keep;
        ops->push_back(sendRecv(a, CollKind::Recv, r, nullptr, recv + r * block));
      }
      return ncclSuccess;
    }
    case CollKind::Gather:  // blocks flow to the root
      ops->push_back(sendRecv(a, CollKind::Send, a.root, send, nullptr));
      for (int r = 0; me == a.root && r < n; ++r) ops->push_back(sendRecv(a, CollKind::Recv, r, nullptr, recv + r * block));
      return ncclSuccess;
    case CollKind::Scatter:  // and from it
      ops->push_back(sendRecv(a, CollKind::Recv, a.root, nullptr, recv));
      for (int r = 0; me == a.root && r < n; ++r) ops->push_back(sendRecv(a, CollKind::Send, r, send + r * block, nullptr));
      return ncclSuccess;
    default:
      return ncclInternalError;
  }
}

}  // namespace accl
