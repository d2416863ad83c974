// Which algorithm runs a collective: an alpha-beta cost model (time = hops x
// latency + bytes on the busiest link / bandwidth) per algorithm, restricted by
// NCCL_ALGO. The model and its constants are in docs/tuning.md;
// acclTunerPredict/acclTunerChoose (accl.h) expose it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "coll/coll.h"

namespace accl {

// The algorithms NCCL_ALGO may enable, per collective (NCCL's token names).
struct AlgoMask {
  bool ring[7] = {true, true, true, true, true, true, true};  // indexed by CollKind
  bool tree[7] = {true, true, true, true, true, true, true};

  // Whether `k` has an algorithm left (ACCL's tree is allreduce's alone).
  bool allowsAny(CollKind k) const {
    const int c = static_cast<int>(k);
    return ring[c] || (k == CollKind::AllReduce && tree[c]);
  }
  // As bits (ring: bit c, tree: bit 8 + c), for the ranks to compare at init.
  uint32_t bits() const {
    uint32_t b = 0;
    for (int c = 0; c < 7; ++c) b |= (ring[c] ? 1u << c : 0u) | (tree[c] ? 1u << (8 + c) : 0u);
    return b;
  }
  void setBits(uint32_t b) {
    for (int c = 0; c < 7; ++c) {
      ring[c] = (b >> c & 1) != 0;
      tree[c] = (b >> (8 + c) & 1) != 0;
    }
  }
};

// Parses NCCL_ALGO / NCCL_PROTO with NCCL's syntax ("ring,tree", "^tree",
// "allreduce:tree;broadcast:ring"). false + *error for an unknown token.
bool parseAlgoSpec(const char* spec, AlgoMask* out, std::string* error);
bool parseProtoSpec(const char* spec, std::string* error);

// Predicted microseconds for kind/algo moving `bytes` (the call's own size:
// per-rank count x element size) over nranks ranks spread across nhosts hosts.
double predictUs(CollKind kind, Algo algo, size_t bytes, int nranks, int nhosts);

// ACCL_DIRECT and NCCL_ALGO allow the direct collectives (host and device).
// NCCL_ALGO names only NCCL's algorithms, so once set it leaves them out, as
// NCCL leaves out those it does not name.
bool directAllowed();

// The algorithm for this call on this communicator (checks NCCL_ALGO); Default
// (with a WARN) if NCCL_ALGO leaves none available.
Algo chooseAlgo(const CollArgs& a);

}  // namespace accl
