// An operation as every layer sees it once the API layer checked it: which
// collective, its buffers and reduction; and which algorithms NCCL_ALGO
// allows for each kind (the ranks agree on them at init).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "device/host_reduce.h"
#include "nccl.h"

struct ncclComm;

namespace accl {

enum class CollKind { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Send, Recv, AllToAll, Gather, Scatter };
enum class Algo { Default = -1, Ring = 0, Tree = 1, Hier = 2 };
// The collectives that have a hierarchical algorithm (coll/hier.h).
inline bool hasHier(CollKind k) {
  return k == CollKind::AllReduce || k == CollKind::AllGather || k == CollKind::ReduceScatter;
}
inline const char* algoName(Algo a) { return a == Algo::Tree ? "tree" : a == Algo::Hier ? "hier" : "ring"; }

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

// The algorithms NCCL_ALGO allows, per kind (coll/tuner.h parses it).
struct AlgoMask {
  bool ring[7] = {true, true, true, true, true, true, true};  // indexed by CollKind
  bool tree[7] = {true, true, true, true, true, true, true};
  bool hier[7] = {true, true, true, true, true, true, true};  // ACCL's own token, "hier"

  // Whether `k` has an algorithm left (ACCL's tree is allreduce's alone;
  // hier is allreduce's, allgather's and reducescatter's, and needs hosts of
  // equal ranks, which ring is the fallback of).
  bool allowsAny(CollKind k) const {
    const int c = static_cast<int>(k);
    return ring[c] || (k == CollKind::AllReduce && tree[c]) || (hasHier(k) && hier[c]);
  }
  // As bits (ring: bit c, tree: bit 8 + c, hier: bit 16 + c), for the ranks to compare at init.
  uint32_t bits() const {
    uint32_t b = 0;
    for (int c = 0; c < 7; ++c)
      b |= (ring[c] ? 1u << c : 0u) | (tree[c] ? 1u << (8 + c) : 0u) | (hier[c] ? 1u << (16 + c) : 0u);
    return b;
  }
  void setBits(uint32_t b) {
    for (int c = 0; c < 7; ++c) {
      ring[c] = (b >> c & 1) != 0;
      tree[c] = (b >> (8 + c) & 1) != 0;
      hier[c] = (b >> (16 + c) & 1) != 0;
    }
  }
};

}  // namespace accl
