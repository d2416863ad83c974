// A collective or point-to-point call as the executor sees it, after the API
// layer checked it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "device/host_reduce.h"
#include "nccl.h"

struct ncclComm;

namespace accl {

enum class CollKind { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Send, Recv, AllToAll, Gather, Scatter };
enum class Algo { Default = -1, Ring = 0, Tree = 1 };

struct CollArgs {
  CollKind kind;
  const char* opName;  // "ncclAllReduce", for messages
  const void* sendbuff;
  void* recvbuff;
  size_t count;        // per NCCL's definition for the call (per rank for allgather/reducescatter)
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;            // root for rooted collectives, peer for send/recv
  ncclComm* comm;
  void* stream = nullptr;  // cudaStream_t (device mode)
  bool onDevice = false;   // device buffers: runs as a kernel on `stream`
  bool cut = false;        // a chunk of a call cut apart (coll/dev_staged.cc): runs as it is
  std::shared_ptr<void> keep;  // a staging copy a send reads (in-place all-to-all)
  // Filled when the call is issued (the op may be destroyed before a group runs it).
  Reducer red;
  const void* deviceScalar = nullptr;  // PreMulSum ncclScalarDevice: read when the operation runs
};

bool isP2p(CollKind k);
// Whether [a, a + aBytes) and [b, b + bBytes) share a byte (an empty one shares none).
inline bool rangesOverlap(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && x < y + bBytes && y < x + aBytes;
}
const char* collName(CollKind k);  // "AllReduce", as NCCL_ALGO spells it (lower-cased)
// All-to-all, gather and scatter: sends and receives (coll/send_recv_colls.cc),
// or inline when small on one host.
bool runsAsSendRecv(CollKind k);
// The sends and receives of such a call (an in-place all-to-all's from a copy
// of its input, which the ops hold in `keep`).
ncclResult_t asSendRecv(const CollArgs& a, std::vector<CollArgs>* ops);

// Runs one collective to completion on the calling thread (host mode).
ncclResult_t runCollective(const CollArgs& args);
// Runs a batch of sends and receives of one communicator concurrently
// (a group's point-to-point part), to completion.
ncclResult_t runP2p(ncclComm* comm, const std::vector<CollArgs>& ops);

// One rank's whole reduction (nranks == 1): out = finish(prepare(in)).
void reduceAlone(const void* in, void* out, size_t count, size_t esize, const Reducer& red);

// The algorithms (one file each).
ncclResult_t ringAllReduce(const CollArgs& a, const Reducer& red);
ncclResult_t treeAllReduce(const CollArgs& a, const Reducer& red);
ncclResult_t ringBroadcast(const CollArgs& a);
ncclResult_t ringReduce(const CollArgs& a, const Reducer& red);
ncclResult_t ringAllGather(const CollArgs& a);
ncclResult_t ringReduceScatter(const CollArgs& a, const Reducer& red);

}  // namespace accl
