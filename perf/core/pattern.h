// The data the drivers send, and what a correct library must return.
//
// Every input element is a small integer chosen from (rank, index, seed), in a
// range where the datatype holds it and every partial result exactly, for any
// reduction order:
//   sum    at each index at most m ranks (m*K <= the type's exact range) hold a
//          value in [-K, K] (unsigned: [0, K]); the others hold 0
//   mulsum as sum, each rank's value then scaled by its scalar 1 + rank%2
//   prod   at most m ranks hold 2 (or -2), the others 1 (or -1): |product| <= 2^maxPow2
//   max/min any value in [-K, K]
//   avg    c(index) on every rank, +1 on one rank and -1 on the next, so the sum
//          is nranks*c: exact for integers; float types use a tolerance,
//          because NCCL averages floats as a sum of x/nranks
// So expected results are computed in double and compared exactly (avg on
// float types: within a few units of roundoff).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/types.h"

namespace perf {

class Pattern {
 public:
  Pattern(ncclDataType_t type, Op op, int nranks, uint32_t seed);

  // Input element `index` of `rank`'s send buffer (index in the whole buffer).
  double value(int rank, size_t index) const;
  // The reduction over all ranks of value(r, index) (op None: not meaningful).
  double reduced(size_t index) const;
  // PreMulSum's scalar for `rank`.
  double scalar(int rank) const { return 1 + rank % 2; }
  // Whether `got` is an acceptable result where `want` is the exact one.
  bool matches(double got, double want) const;

  ncclDataType_t type() const { return type_; }
  Op op() const { return op_; }

 private:
  uint32_t hash(int rank, size_t index) const;
  bool contributes(int rank, size_t index) const;

  ncclDataType_t type_;
  Op op_;
  int nranks_;
  uint32_t seed_;
  bool signed_;
  int64_t k_ = 0;  // value magnitude bound
  int m_ = 0;      // ranks contributing a non-identity value at each index
  double tolerance_ = 0;
};

}  // namespace perf
