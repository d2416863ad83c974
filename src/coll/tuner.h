// Which algorithm runs a collective: an alpha-beta cost model (time = hops x
// latency + bytes on the busiest link / bandwidth) per algorithm, restricted by
// NCCL_ALGO. The model and its constants are in docs/tuning.md;
// acclTunerPredict/acclTunerChoose (accl.h) expose it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "coll/coll.h"
#include "core/ops.h"

namespace accl {

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

// Whether the hierarchical allreduce can run on `comm`: two hosts or more,
// each with the same number of ranks, two or more (coll/hier.cc).
bool hierShape(const ncclComm* comm);

// Of the algorithms allowed, the one predicted fastest (ring where none is).
Algo fastestAlgo(CollKind kind, size_t bytes, int nranks, int nhosts, bool ring, bool tree, bool hier);

}  // namespace accl
