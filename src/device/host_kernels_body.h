// The body of the host executor's reduction kernels. host_kernels.cc includes
// it once per instruction set, each time inside that set's own namespace and
// target pragma, after every header it uses: so no include guard, no includes.
// Every instruction set computes the same bits (no operation here depends on
// the vector width, and host_kernels.cc turns floating-point contraction off).

// The kernels loop over each type's storage: the low-precision types' bits
// (GCC vectorises no loop that loads a struct), every other type itself.
template <typename T, bool = IsLowp<T>::value>
struct RawOf {
  using type = T;
};
template <typename T>
struct RawOf<T, true> {
  using type = decltype(T::bits);
};
template <typename T>
using Raw = typename RawOf<T>::type;

// Op on two values of T (their storage), stored as NCCL stores it; every
// form but fp8's is one the compiler vectorises. Integers compute as
// themselves. float and double max and min are fmax and fmin written as a
// comparison (a NaN operand is ignored; libm's fmaxf, a call, is not
// vectorised: 4 GB/s). float16's and bfloat16's sum and product compute in
// float through lowp_vec.h's branch-free conversions, their max and min
// through its selectBits. fp8 looks every pair up in a table of lowp.h's
// results (fp8Table), with gathers in the wider sets (fp8ByGather).
// perf/tools/reduce_speed measures them all.
// Kind: 0 integers, float and double; 1 float16 and bfloat16; 2 fp8.
template <typename T, template <typename> class Op, int Kind = IsLowp<T>::value ? (sizeof(T) == 1 ? 2 : 1) : 0>
struct Elem {
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point<T>::value && std::is_same<Op<T>, OpMax<T>>::value)
      return a > b || b != b ? a : b;  // on a tie (+0, -0) the second, as glibc's fmaxf (maxss)
    else if constexpr (std::is_floating_point<T>::value && std::is_same<Op<T>, OpMin<T>>::value)
      return a < b || b != b ? a : b;
    else
      return Op<T>()(a, b);
  }
};
template <typename T, template <typename> class Op>
struct Elem<T, Op, 1> {
  Raw<T> operator()(Raw<T> a, Raw<T> b) const {
    if constexpr (std::is_same<Op<T>, OpMax<T>>::value) return lowp_vec::selectBits<T, true>(a, b);
    else if constexpr (std::is_same<Op<T>, OpMin<T>>::value) return lowp_vec::selectBits<T, false>(a, b);
    else return lowp_vec::roundResult<T>(Op<float>()(lowp_vec::toFloat(T{a}), lowp_vec::toFloat(T{b}))).bits;
  }
};
template <typename T, template <typename> class Op>
struct Elem<T, Op, 2> {
  const uint32_t* table = fp8Table<T, Op>();
  uint8_t operator()(uint8_t a, uint8_t b) const { return static_cast<uint8_t>(table[a << 8 | b]); }
};

// A PreMulSum scalar in the datatype (its storage): integers as given,
// floating types from the double it was stored in (exact for a scalar of the
// type; T(float(1/n)) for avg, as NCCL).
template <typename T>
Raw<T> scalarOf(const Scalar* s) {
  if constexpr (IsLowp<T>::value) return fromFloat<T>(static_cast<float>(s->f)).bits;
  else if constexpr (std::is_integral<T>::value) return static_cast<T>(s->i);
  else return static_cast<T>(s->f);
}

// float16 sums, products and PreMulSum through F16C's conversions, 8 elements
// at a time, in the sets that have them (x86-64-v3 and v4); returns
// how many leading elements it did (0 elsewhere). vcvtps2ph rounds to nearest
// even by its immediate, whatever the rounding mode, gives infinity on
// overflow and keeps subnormal results; NaN results become lowp.h's
// canonical 0x7fff. So the bits are lowp.h's (host_reduce_lowp_matches_lowp
// checks them, under FTZ and DAZ and both directed roundings too), at 3-4x
// the speed of the converted loop.
enum class HalfOp { Sum, Prod, PreMul, PreMulSum };  // PreMul: T(y * k); PreMulSum: x + T(y * k)
template <template <typename> class Op>
constexpr HalfOp halfOpOf() {
  return std::is_same<Op<float>, OpProd<float>>::value ? HalfOp::Prod : HalfOp::Sum;
}
template <HalfOp H>
size_t halfByF16c(uint16_t* d, uint16_t* d2, const uint16_t* x, const uint16_t* y, size_t n, uint16_t k) {
  size_t i = 0;
#ifdef ACCL_HOST_X86_LEVELS
  if constexpr (kLevel >= 3) {
    const __m128i magnitude = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
    const __m256 scalar = _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(k)));
    auto load = [](const auto* p) {  // (generic: the base set, without AVX, never instantiates it)
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); };
    auto store = [&](auto v) {  // to float16, round to nearest even; NaN -> 0x7fff
      const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      return _mm_blendv_epi8(h, magnitude, _mm_cmpgt_epi16(_mm_and_si128(h, magnitude), inf));
    };
    for (; i + 8 <= n; i += 8) {
      __m128i r;
      if constexpr (H == HalfOp::Sum) r = store(_mm256_add_ps(load(x + i), load(y + i)));
      else if constexpr (H == HalfOp::Prod) r = store(_mm256_mul_ps(load(x + i), load(y + i)));
      else if constexpr (H == HalfOp::PreMul) r = store(_mm256_mul_ps(load(y + i), scalar));
      else r = store(_mm256_add_ps(load(x + i), _mm256_cvtph_ps(store(_mm256_mul_ps(load(y + i), scalar)))));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), r);
      if (d2) _mm_storeu_si128(reinterpret_cast<__m128i*>(d2 + i), r);
    }
  }
#endif
  return i;
}
// fp8 through its tables (fp8Table) with gathers, 8 (x86-64-v3) or 16 (v4)
// lookups an instruction (a combine runs at 3x the scalar lookups' speed; a
// PreMulSum, two lookups in turn, at 1-1.5x); returns how many leading
// elements it did (0 in the baseline). What: Combine d = t1[x, y]; PreMul
// d = t1[y, k] (t1 the product table); PreMulSum d = t2[x, t1[y, k]] (t2
// the sum table).
enum class Fp8Op { Combine, PreMul, PreMulSum };
template <Fp8Op What>
size_t fp8ByGather(uint8_t* d, uint8_t* d2, const uint8_t* x, const uint8_t* y, size_t n, const uint32_t* t1,
                   const uint32_t* t2, uint8_t k) {
  size_t i = 0;
#ifdef ACCL_HOST_X86_LEVELS
  // (generic lambdas: the baseline, without AVX, never instantiates them)
  auto bytesAt = [](const auto* p, auto wide) {  // 8 or 16 bytes at p, each widened to 32 bits
    if constexpr (sizeof(wide) == 64) return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    else return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  };
  auto lookup = [](const uint32_t* table, auto hi, auto lo) {  // table[hi << 8 | lo]
    if constexpr (sizeof(hi) == 64) return _mm512_i32gather_epi32(_mm512_or_si512(_mm512_slli_epi32(hi, 8), lo), table, 4);
    else return _mm256_i32gather_epi32(reinterpret_cast<const int*>(table), _mm256_or_si256(_mm256_slli_epi32(hi, 8), lo), 4);
  };
  auto run = [&](auto ks, auto store) {  // ks: k in every lane (and the width)
    constexpr size_t kWidth = sizeof(ks) / 4;
    for (; i + kWidth <= n; i += kWidth) {
      decltype(ks) v;
      if constexpr (What == Fp8Op::Combine) v = lookup(t1, bytesAt(x + i, ks), bytesAt(y + i, ks));
      else v = lookup(t1, bytesAt(y + i, ks), ks);
      if constexpr (What == Fp8Op::PreMulSum) v = lookup(t2, bytesAt(x + i, ks), v);  // entries are below 256
      store(d + i, v);
      if (d2) store(d2 + i, v);
    }
  };
  if constexpr (kLevel >= 4) {
    run(_mm512_set1_epi32(k),
        [](uint8_t* p, auto v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v)); });
  } else if constexpr (kLevel >= 3) {
    run(_mm256_set1_epi32(k), [](uint8_t* p, auto v) {  // each dword's low byte, in order
      const __m256i lows = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
      const __m256i s = _mm256_shuffle_epi8(v, lows);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(p),
                       _mm_unpacklo_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1)));
    });
  }
#endif
  return i;
}
template <typename T>
constexpr bool kFp8 = std::is_same<T, fp8e4m3_t>::value || std::is_same<T, fp8e5m2_t>::value;

template <typename T, template <typename> class Op>
constexpr bool kHalfArith = std::is_same<T, half_t>::value && (std::is_same<Op<float>, OpSum<float>>::value ||
                                                               std::is_same<Op<float>, OpProd<float>>::value);

// Plain element-wise loops (after F16C's part): the compiler vectorises them, and dst may alias a or b.
template <typename T, template <typename> class Op>
void combineK(void* dst, const void* a, const void* b, size_t n, const Scalar*) {
  Raw<T>* d = static_cast<Raw<T>*>(dst);
  const Raw<T>* x = static_cast<const Raw<T>*>(a);
  const Raw<T>* y = static_cast<const Raw<T>*>(b);
  const Elem<T, Op> op;
  size_t i = 0;
  if constexpr (kHalfArith<T, Op>) i = halfByF16c<halfOpOf<Op>()>(d, nullptr, x, y, n, 0);
  if constexpr (kFp8<T>) i = fp8ByGather<Fp8Op::Combine>(d, nullptr, x, y, n, op.table, nullptr, 0);
  for (; i < n; ++i) d[i] = op(x[i], y[i]);
}

template <typename T, template <typename> class Op>
void combine2K(void* dst1, void* dst2, const void* a, const void* b, size_t n, const Scalar*) {
  Raw<T>* d1 = static_cast<Raw<T>*>(dst1);
  Raw<T>* d2 = static_cast<Raw<T>*>(dst2);
  const Raw<T>* x = static_cast<const Raw<T>*>(a);
  const Raw<T>* y = static_cast<const Raw<T>*>(b);
  const Elem<T, Op> op;
  size_t i = 0;
  if constexpr (kHalfArith<T, Op>) i = halfByF16c<halfOpOf<Op>()>(d1, d2, x, y, n, 0);
  if constexpr (kFp8<T>) i = fp8ByGather<Fp8Op::Combine>(d1, d2, x, y, n, op.table, nullptr, 0);
  for (; i < n; ++i) {
    const Raw<T> v = op(x[i], y[i]);
    d1[i] = v;
    d2[i] = v;
  }
}

// The product is rounded to T before the sum: T(T(local * s) + peer), as NCCL.
template <typename T>
void preMulCombineK(void* dst, const void* a, const void* b, size_t n, const Scalar* s) {
  Raw<T>* d = static_cast<Raw<T>*>(dst);
  const Raw<T>* x = static_cast<const Raw<T>*>(a);
  const Raw<T>* y = static_cast<const Raw<T>*>(b);
  const Raw<T> k = scalarOf<T>(s);
  const Elem<T, OpSum> add;
  const Elem<T, OpProd> mul;
  size_t i = 0;
  if constexpr (std::is_same<T, half_t>::value) i = halfByF16c<HalfOp::PreMulSum>(d, nullptr, x, y, n, k);
  if constexpr (kFp8<T>) i = fp8ByGather<Fp8Op::PreMulSum>(d, nullptr, x, y, n, mul.table, add.table, k);
  for (; i < n; ++i) d[i] = add(x[i], mul(y[i], k));
}

template <typename T>
void preMulPrepareK(void* dst, const void* b, size_t n, const Scalar* s) {
  Raw<T>* d = static_cast<Raw<T>*>(dst);
  const Raw<T>* y = static_cast<const Raw<T>*>(b);
  const Raw<T> k = scalarOf<T>(s);
  const Elem<T, OpProd> mul;
  size_t i = 0;
  if constexpr (std::is_same<T, half_t>::value) i = halfByF16c<HalfOp::PreMul>(d, nullptr, nullptr, y, n, k);
  if constexpr (kFp8<T>) i = fp8ByGather<Fp8Op::PreMul>(d, nullptr, nullptr, y, n, mul.table, nullptr, k);
  for (; i < n; ++i) d[i] = mul(y[i], k);
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

// Kernels for (type, op); false where there are none.
inline bool kernels(ncclDataType_t type, OpKind op, ReduceKernels* out) {
#define ACCL_TYPE_CASE(typeEnum, ctype) \
  case typeEnum: return kernelsFor<ctype>(op, out);
  switch (type) {
    ACCL_NATIVE_TYPES(ACCL_TYPE_CASE)
    ACCL_LOWP_TYPES(ACCL_TYPE_CASE)
    default: return false;
  }
#undef ACCL_TYPE_CASE
}
