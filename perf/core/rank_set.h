// One thread's ranks (-g of them): their communicators, buffers and streams,
// and the mechanics the benchmark needs: launch one collective on all of them
// (inside a group when there are several), wait for it, fill inputs and count
// wrong outputs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/shared.h"

namespace perf {

// The sizes of one row, in bytes (nccl-tests' setupArgs).
struct Layout {
  size_t elt = 0;
  Counts counts;
  size_t sendBytes() const { return counts.send * elt; }
  size_t recvBytes() const { return counts.recv * elt; }
  size_t totalBytes() const { return std::max(sendBytes(), recvBytes()); }
};
Layout makeLayout(const Collective& c, size_t bytes, ncclDataType_t type, int nranks);

// What the test in progress runs.
struct TestParams {
  ncclDataType_t type;
  Op op;
  int root;
};

class RankSet {
 public:
  RankSet(Shared* s, int thread);

  int thread() const { return thread_; }
  int firstRank() const { return firstRank_; }
  int size() const { return int(ranks_.size()); }
  bool anyHostMode() const;

  // Creates the communicators (grouped when several) and the buffers.
  void init();
  void destroy();
  // This thread's "# Rank ..." lines.
  std::string describe() const;

  // Launches one collective on every rank. With `probe`, a refusal
  // (ncclInvalidUsage, or ncclInvalidArgument as NVIDIA NCCL answers a pair it
  // lacks) returns false with the library's message in *why instead of
  // failing the run.
  bool start(const TestParams& t, const Layout& l, bool inPlace, int iter, bool probe, std::string* why);
  void complete();  // waits for the streams (device mode)

  // Writes each rank's inputs for `seed` and clears its output.
  void fill(const TestParams& t, const Layout& l, bool inPlace, uint32_t seed);
  // Wrong output elements over this thread's ranks.
  long long check(const TestParams& t, const Layout& l, bool inPlace, uint32_t seed);

  // CUDA graph capture of the streams (device mode).
  void beginCapture();
  void endCapture(std::vector<void*>* graphs);
  void launch(const std::vector<void*>& graphs);

 private:
  struct Rank {
    int rank = 0;
    int cudaDev = -1;  // device made current before init (-1: none)
    int commDev = -1;  // what the library reports (-1: host mode)
    ncclComm_t comm = nullptr;
    std::unique_ptr<RankBuffers> buf;
    void* handles[2] = {nullptr, nullptr};  // -R: the send and receive buffers' registrations
  };
  void registerBuffers();
  void deregisterBuffers();
  void groupCall(ncclResult_t r, const char* call);
  char* sendPtr(const Rank& r, const Layout& l, bool inPlace, size_t shift) const;
  char* recvPtr(const Rank& r, const Layout& l, bool inPlace, size_t shift) const;
  [[noreturn]] void fail(const Rank& r, const std::string& what) const { failRank(*s_, r.rank, what); }

  Shared* s_;
  int thread_;
  int firstRank_;
  size_t bufBytes_;
  std::vector<Rank> ranks_;
};

}  // namespace perf
