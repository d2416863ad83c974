#include "device/host_reduce.h"

#include <cstring>
#include <type_traits>

#include "device/lowp.h"
#include "device/reduce_ops.h"

namespace accl {
namespace {

// How a storage type is computed with. Every type is computed as itself: the
// low-precision types' operators (device/lowp.h) compute in float and round
// back the way NCCL's kernels do (fp8 through half).
template <typename T>
struct Arith {
  using A = T;
  static A load(T x) { return x; }
  static T store(A a) { return a; }
};

// A PreMulSum scalar in the datatype: integers as given, floating types from
// the double it was stored in (exact for a scalar of the type; T(float(1/n)) for avg, as NCCL).
template <typename A, int Kind = std::is_integral<A>::value ? 0 : (IsLowp<A>::value ? 2 : 1)>
struct ScalarOf {
  static A get(const Scalar* s) { return static_cast<A>(s->i); }
};
template <typename A>
struct ScalarOf<A, 1> {
  static A get(const Scalar* s) { return static_cast<A>(s->f); }
};
template <typename A>
struct ScalarOf<A, 2> {
  static A get(const Scalar* s) { return fromFloat<A>(static_cast<float>(s->f)); }
};

template <typename T, template <typename> class Op>
void combineK(void* dst, const void* a, const void* b, size_t n, const Scalar*) {
  using Ar = Arith<T>;
  using A = typename Ar::A;
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  Op<A> op;
  // A plain element-wise loop: the compiler vectorises it, and dst may alias a or b.
  for (size_t i = 0; i < n; ++i) d[i] = Ar::store(op(Ar::load(x[i]), Ar::load(y[i])));
}

template <typename T, template <typename> class Op>
void combine2K(void* dst1, void* dst2, const void* a, const void* b, size_t n, const Scalar*) {
  using Ar = Arith<T>;
  T* d1 = static_cast<T*>(dst1);
  T* d2 = static_cast<T*>(dst2);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  Op<typename Ar::A> op;
  for (size_t i = 0; i < n; ++i) {
    T v = Ar::store(op(Ar::load(x[i]), Ar::load(y[i])));
    d1[i] = v;
    d2[i] = v;
  }
}

template <typename T>
void preMulCombineK(void* dst, const void* a, const void* b, size_t n, const Scalar* s) {
  using Ar = Arith<T>;
  using A = typename Ar::A;
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  const A k = ScalarOf<A>::get(s);
  OpSum<A> add;
  OpProd<A> mul;
  // The product is rounded to T before the sum: T(T(local * s) + peer), as NCCL.
  for (size_t i = 0; i < n; ++i) d[i] = Ar::store(add(Ar::load(x[i]), mul(Ar::load(y[i]), k)));
}

template <typename T>
void preMulPrepareK(void* dst, const void* b, size_t n, const Scalar* s) {
  using Ar = Arith<T>;
  using A = typename Ar::A;
  T* d = static_cast<T*>(dst);
  const T* y = static_cast<const T*>(b);
  const A k = ScalarOf<A>::get(s);
  OpProd<A> mul;
  for (size_t i = 0; i < n; ++i) d[i] = Ar::store(mul(Ar::load(y[i]), k));
}

template <typename T>
void postDivK(void* dst, size_t n, const Scalar* s) {
  T* d = static_cast<T*>(dst);
  const T k = static_cast<T>(s->i);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] / k);
}

template <typename T>
bool kernelsFor(OpKind op, ReduceKernels* k) {
  *k = ReduceKernels{};
  switch (op) {
    case OpKind::Sum: k->combine = k->merge = &combineK<T, OpSum>; k->combine2 = &combine2K<T, OpSum>; return true;
    case OpKind::Prod: k->combine = k->merge = &combineK<T, OpProd>; k->combine2 = &combine2K<T, OpProd>; return true;
    case OpKind::Max: k->combine = k->merge = &combineK<T, OpMax>; k->combine2 = &combine2K<T, OpMax>; return true;
    case OpKind::Min: k->combine = k->merge = &combineK<T, OpMin>; k->combine2 = &combine2K<T, OpMin>; return true;
    case OpKind::PreMulSum:
      k->combine = &preMulCombineK<T>;
      k->merge = &combineK<T, OpSum>;
      k->prepare = &preMulPrepareK<T>;
      return true;
    case OpKind::SumPostDiv:
      if constexpr (std::is_integral<T>::value) {
        k->combine = k->merge = &combineK<T, OpSum>;
        k->finish = &postDivK<T>;
        return true;
      }
      return false;
  }
  return false;
}

}  // namespace

bool hostKernels(ncclDataType_t type, OpKind op, ReduceKernels* out) {
#define ACCL_TYPE_CASE(typeEnum, ctype) \
  case typeEnum: return kernelsFor<ctype>(op, out);
  switch (type) {
    ACCL_NATIVE_TYPES(ACCL_TYPE_CASE)
    ACCL_LOWP_TYPES(ACCL_TYPE_CASE)
    default: return false;
  }
#undef ACCL_TYPE_CASE
}

void Reducer::combineFinishCopy(void* out, void* copy, const void* peer, const void* local, size_t n,
                                size_t esize) const {
  // out may alias local (in place), never copy: the fused kernel reads both inputs before writing.
  if (k.combine2 && !k.finish) {
    k.combine2(out, copy, peer, local, n, &scalar);
    return;
  }
  combine(out, peer, local, n);
  finish(out, n);
  memcpy(copy, out, n * esize);
}

void Reducer::prepare(void* dst, const void* local, size_t n, size_t esize) const {
  if (k.prepare) k.prepare(dst, local, n, &scalar);
  else if (dst != local) memcpy(dst, local, n * esize);
}

size_t typeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

const char* typeName(ncclDataType_t type) {
  static const char* const kNames[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                       "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  int t = static_cast<int>(type);
  return t >= 0 && t < 12 ? kNames[t] : "invalid";
}

bool typeIsFloating(ncclDataType_t type) {
  return type == ncclFloat16 || type == ncclFloat32 || type == ncclFloat64 || type == ncclBfloat16 ||
         type == ncclFloat8e4m3 || type == ncclFloat8e5m2;
}

}  // namespace accl
