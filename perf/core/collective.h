// What one driver (one file in perf/colls/) tells the shared core about its
// collective. Sizes follow nccl-tests: the swept size S gives count = S / eltsize,
// from which the collective derives its buffer counts; the table's size column
// is max(send, recv) bytes and its count column the count passed to the call.
#pragma once

#include <cstddef>

#include "core/pattern.h"
#include "nccl.h"

namespace perf {

struct Counts {
  size_t send = 0;          // elements in each rank's send buffer
  size_t recv = 0;          // elements in each rank's receive buffer
  size_t param = 0;         // the count argument of the call
  size_t sendInPlace = 0;   // in place: send buffer = recv buffer + rank * sendInPlace
  size_t recvInPlace = 0;   // in place: recv buffer = recv buffer + rank * recvInPlace
};

// One rank's call. `op` is ready to pass (a PreMulSum operator is created by
// the core); collectives without a root get root = -1.
struct CallArgs {
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  ncclComm_t comm;
  cudaStream_t stream;
};

struct Collective {
  const char* program;  // "all_reduce_perf", used in messages and the preamble
  const char* call;     // the NCCL function named in error messages
  bool takesOp;         // reduction: the redop column shows the operator
  bool hasRoot;         // rooted: -r chooses the root (all roots with -r all)
  bool checkInPlace;    // false: in-place results are not checked (nccl-tests' sendrecv)

  Counts (*counts)(size_t count, int nranks);
  // algbw = param * eltsize * algFactor(n) / time; busbw = algbw * busFactor(n).
  double (*algFactor)(int nranks);
  double (*busFactor)(int nranks);
  // The value of element i of rank's send buffer (i < Counts::send).
  double (*input)(const Pattern& p, int rank, int nranks, int root, size_t i);
  // Whether element i of rank's receive buffer is defined after the call
  // (i < Counts::recv), and if so its exact value in *want.
  bool (*expected)(const Pattern& p, int rank, int nranks, int root, size_t param, size_t i, double* want);
  ncclResult_t (*run)(const CallArgs& a);
};

// Each driver defines this: the collective it benchmarks.
const Collective& driverCollective();

}  // namespace perf
