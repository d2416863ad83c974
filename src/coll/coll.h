// A collective or point-to-point call as the executor sees it, after the API
// layer checked it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/ops.h"
#include "nccl.h"

struct ncclComm;

namespace accl {

class Connection;

// A ring as the ring algorithms walk it: the block each position owns, in
// ring order (the communicator's ring: its ranks; a ring of the hierarchical
// allreduce: places within a host, or hosts), this rank's position, and its
// connections to the next and from the previous.
struct RingPath {
  const std::vector<int>* blocks;
  int position;
  Connection* send;
  Connection* recv;
  size_t stride = 0;  // bytes from one block's start to the next's in the whole buffer (0: a block's size)
  int size() const { return static_cast<int>(blocks->size()); }
  int mine() const { return (*blocks)[position]; }
};
RingPath commRing(ncclComm* comm);

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
ncclResult_t ringAllReduce(const CollArgs& a, const Reducer& red, const RingPath& ring);
ncclResult_t treeAllReduce(const CollArgs& a, const Reducer& red);
ncclResult_t hierAllReduce(const CollArgs& a, const Reducer& red);
ncclResult_t hierAllGather(const CollArgs& a);
ncclResult_t hierReduceScatter(const CollArgs& a, const Reducer& red);
ncclResult_t ringBroadcast(const CollArgs& a);
ncclResult_t ringReduce(const CollArgs& a, const Reducer& red);
ncclResult_t ringAllGather(const CollArgs& a, const RingPath& ring);
ncclResult_t ringReduceScatter(const CollArgs& a, const Reducer& red, const RingPath& ring);

}  // namespace accl
