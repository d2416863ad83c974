// Type-erased element-wise kernels for the host executor: one set per
// (datatype, operation), looked up once per collective.
//
// Every reducing algorithm needs four things: combine a peer's partial result
// with local input (the local input is "prepared" first: PreMulSum multiplies
// it by its scalar), merge two partial results, prepare local input alone (the
// first hop), and finish a complete result (integer average divides by n).
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace accl {

// The scalar of PreMulSum (f for floating types, i for integers) or the divisor of SumPostDiv (i).
struct Scalar {
  double f = 1.0;
  int64_t i = 1;
};

enum class OpKind { Sum, Prod, Max, Min, PreMulSum, SumPostDiv };

struct ReduceKernels {
  void (*combine)(void* dst, const void* peer, const void* local, size_t n, const Scalar* s);
  // combine into two destinations at once (output and the next hop's slot): one pass less
  void (*combine2)(void* dst1, void* dst2, const void* peer, const void* local, size_t n, const Scalar* s);
  void (*merge)(void* dst, const void* a, const void* b, size_t n, const Scalar* s);
  void (*prepare)(void* dst, const void* local, size_t n, const Scalar* s);  // NULL: a plain copy
  void (*finish)(void* dst, size_t n, const Scalar* s);                      // NULL: nothing to do
};

// false when the host executor has no kernels for this pair.
bool hostKernels(ncclDataType_t type, OpKind op, ReduceKernels* out);

// A collective's reduction: kernels plus the scalar they use.
struct Reducer {
  ReduceKernels k{};
  Scalar scalar;
  OpKind kind = OpKind::Sum;  // for the CUDA executor, which has its own kernels

  void combine(void* dst, const void* peer, const void* local, size_t n) const {
    k.combine(dst, peer, local, n, &scalar);
  }
  void merge(void* dst, const void* a, const void* b, size_t n) const { k.merge(dst, a, b, n, &scalar); }
  void prepare(void* dst, const void* local, size_t n, size_t esize) const;
  void finish(void* dst, size_t n) const {
    if (k.finish) k.finish(dst, n, &scalar);
  }
  // out <- finish(combine(peer, local)); copy <- out
  void combineFinishCopy(void* out, void* copy, const void* peer, const void* local, size_t n, size_t esize) const;
};

size_t typeSize(ncclDataType_t type);  // 0 for an invalid type
const char* typeName(ncclDataType_t type);
bool typeIsFloating(ncclDataType_t type);

}  // namespace accl
