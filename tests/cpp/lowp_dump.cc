// Dumps what device/lowp.h computes, for tests/native/test_lowp.py (which
// compares it with ml_dtypes and with NCCL's semantics) and for people.
//
//   lowp_dump tofloat <type>                  float32 bits (hex) of every encoding, in order
//   lowp_dump fromfloat <type> [nosat]        float32 bits (hex, one per token) on stdin -> result bits
//   lowp_dump roundresult <type>              like fromfloat, through roundResult<T> (NCCL's store)
//   lowp_dump reduce <type> <op> a b [s]      one operation on encodings (hex); op: sum prod max min premulsum
//   lowp_dump avgscalar <type> <nranks>       the ncclAvg scalar's encoding
//   lowp_dump bench <type>                    ns per element of the bulk conversions and of OpSum
// Binary variants for bulk use (raw little-endian on stdin/stdout):
//   lowp_dump fromfloat-bin <type> [nosat]    uint32 in -> T bits out
//   lowp_dump roundresult-bin <type>          uint32 in -> T bits out
//   lowp_dump pairs-bin <type> <op> [s]       pairs of T (a, b) in -> T out (premulsum: a local, b partial)
//   lowp_dump table-bin <type> <op> [s]       fp8 only: all 65536 (a, b), a major -> T out
// <type>: f16 bf16 e4m3 e5m2 (also float16 bfloat16 float8_e4m3fn float8_e5m2).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device/lowp.h"

using namespace accl;

namespace {

int usage() {
  fprintf(stderr,
          "usage: lowp_dump tofloat|fromfloat|roundresult|reduce|avgscalar|bench|fromfloat-bin|roundresult-bin|"
          "pairs-bin|table-bin <type> ...\n");
  return 2;
}

enum class Kind { F16, BF16, E4M3, E5M2, Bad };

Kind parseType(const std::string& s) {
  if (s == "f16" || s == "float16" || s == "half") return Kind::F16;
  if (s == "bf16" || s == "bfloat16") return Kind::BF16;
  if (s == "e4m3" || s == "fp8e4m3" || s == "float8_e4m3fn" || s == "float8e4m3") return Kind::E4M3;
  if (s == "e5m2" || s == "fp8e5m2" || s == "float8_e5m2" || s == "float8e5m2") return Kind::E5M2;
  return Kind::Bad;
}

template <typename T> using Bits = decltype(T::bits);

template <typename T>
T fromFloatMode(float f, bool nosat) {
  if constexpr (std::is_same<T, fp8e4m3_t>::value) { if (nosat) return fp8e4m3FromFloatNoSat(f); }
  if constexpr (std::is_same<T, fp8e5m2_t>::value) { if (nosat) return fp8e5m2FromFloatNoSat(f); }
  return fromFloat<T>(f);
}

float floatOfBits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
uint32_t bitsOfFloat(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

template <typename T>
bool applyOp(const std::string& op, T a, T b, T s, T* out) {
  if (op == "sum") *out = OpSum<T>()(a, b);
  else if (op == "prod") *out = OpProd<T>()(a, b);
  else if (op == "max") *out = OpMax<T>()(a, b);
  else if (op == "min") *out = OpMin<T>()(a, b);
  else if (op == "premulsum") *out = LowpPreMulSum<T>(s)(a, b);
  else return false;
  return true;
}

template <typename T>
int run(const std::string& cmd, int argc, char** argv) {
  constexpr int kBytes = sizeof(T);
  constexpr uint32_t kCount = 1u << (8 * kBytes);
  const bool nosat = argc > 0 && std::string(argv[0]) == "nosat";
  if (cmd == "tofloat") {
    for (uint32_t i = 0; i < kCount; ++i) printf("%08x\n", bitsOfFloat(toFloat(T{static_cast<Bits<T>>(i)})));
    return 0;
  }
  if (cmd == "fromfloat" || cmd == "roundresult") {
    char tok[64];
    while (scanf("%63s", tok) == 1) {
      uint32_t u = static_cast<uint32_t>(strtoul(tok, nullptr, 16));
      T r = cmd == "fromfloat" ? fromFloatMode<T>(floatOfBits(u), nosat) : roundResult<T>(floatOfBits(u));
      printf("%0*x\n", 2 * kBytes, static_cast<unsigned>(r.bits));
    }
    return 0;
  }
  if (cmd == "fromfloat-bin" || cmd == "roundresult-bin") {
    std::vector<uint32_t> in(1 << 16);
    std::vector<T> out(in.size());
    size_t n;
    while ((n = fread(in.data(), 4, in.size(), stdin)) > 0) {
      if (cmd == "fromfloat-bin")
        for (size_t i = 0; i < n; ++i) out[i] = fromFloatMode<T>(floatOfBits(in[i]), nosat);
      else
        for (size_t i = 0; i < n; ++i) out[i] = roundResult<T>(floatOfBits(in[i]));
      fwrite(out.data(), kBytes, n, stdout);
    }
    return 0;
  }
  if (cmd == "reduce") {
    if (argc < 3) return usage();
    const std::string op = argv[0];
    T a{static_cast<Bits<T>>(strtoul(argv[1], nullptr, 16))}, b{static_cast<Bits<T>>(strtoul(argv[2], nullptr, 16))};
    T s{static_cast<Bits<T>>(argc > 3 ? strtoul(argv[3], nullptr, 16) : 0)};
    T r;
    if (!applyOp(op, a, b, s, &r)) return usage();
    printf("%0*x\n", 2 * kBytes, static_cast<unsigned>(r.bits));
    return 0;
  }
  if (cmd == "pairs-bin" || cmd == "table-bin") {
    if (argc < 1) return usage();
    const std::string op = argv[0];
    T s{static_cast<Bits<T>>(argc > 1 ? strtoul(argv[1], nullptr, 16) : 0)};
    T probe;
    if (!applyOp(op, T{0}, T{0}, s, &probe)) return usage();
    std::vector<T> in(2 << 16), out(1 << 16);
    if (cmd == "table-bin") {
      if (kBytes != 1) return usage();
      for (uint32_t a = 0; a < 256; ++a)
        for (uint32_t b = 0; b < 256; ++b) {
          applyOp(op, T{static_cast<Bits<T>>(a)}, T{static_cast<Bits<T>>(b)}, s, &out[a * 256 + b]);
        }
      fwrite(out.data(), kBytes, 65536, stdout);
      return 0;
    }
    size_t n;
    while ((n = fread(in.data(), 2 * kBytes, in.size() / 2, stdin)) > 0) {
      for (size_t i = 0; i < n; ++i) applyOp(op, in[2 * i], in[2 * i + 1], s, &out[i]);
      fwrite(out.data(), kBytes, n, stdout);
    }
    return 0;
  }
  if (cmd == "avgscalar") {
    if (argc < 1) return usage();
    printf("%0*x\n", 2 * kBytes, static_cast<unsigned>(avgScalar<T>(atoi(argv[0])).bits));
    return 0;
  }
  if (cmd == "bench") {
    const size_t n = 1 << 22;
    std::vector<float> f(n), g(n);
    std::vector<T> t(n), u(n);
    uint32_t x = 12345;
    for (size_t i = 0; i < n; ++i) {
      x = x * 1664525u + 1013904223u;
      t[i] = T{static_cast<Bits<T>>(x >> 16)};
      f[i] = static_cast<float>(static_cast<int32_t>(x)) * 1e-7f;
    }
    auto time = [&](const char* what, auto fn) {
      fn();
      auto t0 = std::chrono::steady_clock::now();
      const int reps = 5;
      for (int r = 0; r < reps; ++r) fn();
      double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
      printf("%-14s %.2f ns/elt\n", what, ns / reps / n);
    };
    time("toFloatN", [&] { toFloatN(t.data(), g.data(), n); });
    time("fromFloatN", [&] { fromFloatN(f.data(), u.data(), n); });
    time("roundResultN", [&] { roundResultN(f.data(), u.data(), n); });
    time("OpSum", [&] {
      OpSum<T> op;
      for (size_t i = 0; i < n; ++i) u[i] = op(t[i], u[i]);
    });
    time("OpMax", [&] {
      OpMax<T> op;
      for (size_t i = 0; i < n; ++i) u[i] = op(t[i], u[i]);
    });
    unsigned sum = 0;
    for (size_t i = 0; i < n; ++i) sum += u[i].bits;
    fprintf(stderr, "(checksum %u)\n", sum);
    return 0;
  }
  return usage();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string cmd = argv[1];
  switch (parseType(argv[2])) {
    case Kind::F16: return run<half_t>(cmd, argc - 3, argv + 3);
    case Kind::BF16: return run<bf16_t>(cmd, argc - 3, argv + 3);
    case Kind::E4M3: return run<fp8e4m3_t>(cmd, argc - 3, argv + 3);
    case Kind::E5M2: return run<fp8e5m2_t>(cmd, argc - 3, argv + 3);
    default: return usage();
  }
}
