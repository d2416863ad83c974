// Whether a group's sends and receives, one of each per rank of a
// communicator, form a permutation of the ranks that one launch can move
// (coll/dev_coll.cc, DevPermWork): apart from CUDA, so it can be tested alone.
//
// Rank k sends to sendTo and receives from recvFrom. It is a permutation when
// the rank that k sends to receives from k, for every k: then no two ranks
// send to one receiver, so every receive has exactly one sender. Every send
// and receive carries the same bytes; a rank's two buffers are the same (in
// place) or apart, since one thread reads a pack of every send buffer before
// it writes the same pack of any receive buffer; `direct` says whether the
// pair of k's send may copy between the buffers (ACCL_P2P_DIRECT).
#pragma once

#include <cstddef>
#include <vector>

#include "coll/coll.h"

namespace accl {

struct RankSendRecv {
  int sendTo = -1, recvFrom = -1;
  size_t sendBytes = 0, recvBytes = 0;
  const void* send = nullptr;
  const void* recv = nullptr;
  bool direct = true;
};

inline bool formsPermutation(const std::vector<RankSendRecv>& ranks) {
  const int n = static_cast<int>(ranks.size());
  if (n == 0 || ranks[0].sendBytes == 0) return false;
  const size_t bytes = ranks[0].sendBytes;
  for (int k = 0; k < n; ++k) {
    const RankSendRecv& r = ranks[k];
    if (r.sendTo < 0 || r.sendTo >= n || r.recvFrom < 0 || r.recvFrom >= n) return false;
    if (ranks[r.sendTo].recvFrom != k || (r.sendTo != k && !r.direct)) return false;
    if (r.sendBytes != bytes || r.recvBytes != bytes) return false;
    if (r.send != r.recv && rangesOverlap(r.send, bytes, r.recv, bytes)) return false;
  }
  return true;
}

}  // namespace accl
