// host_kernels_body.h compiled once per instruction set (host_kernels.h says
// which). Each copy lives in its own namespace, and the wider ones under a
// target pragma. The headers come first, outside any pragma, so that every
// inline function they define is baseline code: the wider kernels inline
// them, and no out-of-line copy the linker keeps can hold instructions that
// an older CPU lacks. CMake compiles this file with -ffp-contract=off, so
// that no copy fuses a multiply and an add that the others round twice.
#include "device/host_kernels.h"

#include <array>
#include <cfenv>
#include <cstdint>
#include <type_traits>

#include "device/lowp.h"
#include "device/lowp_vec.h"
#include "device/reduce_ops.h"

// GCC 11 and later (the target pragma knows the x86-64 levels from 11).
// Clang and older GCC build the baseline only.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define ACCL_HOST_X86_LEVELS 1
#include <cpuid.h>
// GCC's AVX-512 intrinsics start from _mm512_undefined_epi32() or
// _mm_undefined_si128(), self-initialised variables that
// -Wmaybe-uninitialized flags where they inline (inside this header only).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace accl {
namespace {

// fp8's Op on every pair of encodings (a << 8 | b), as lowp.h computes it
// rounding to nearest, as NCCL's GPUs do, whatever mode the thread that
// makes it is in (only the sign of a zero sum depends on it: -0 + +0 is -0
// rounding down), made at first use. An entry is 4 bytes (256 KiB for each
// type and op) so that a gather never reads across a cache line: with bytes,
// the 4 a gather reads at an entry cross one at 3 in 64 entries, and gathers
// ran at half speed or less depending on the data and the table's alignment.
// A combine through scalar lookups runs at 4 GB/s of traffic (in the cache),
// through gathers at 12-14, where the conversions, which GCC does not
// vectorise for 8-bit types, ran at 0.1-0.5. Each table used takes 256 KiB
// (at most 2 MiB for the 8).
template <typename T, template <typename> class Op>
const uint32_t* fp8Table() {
  static const std::array<uint32_t, 65536> table = [] {
    std::array<uint32_t, 65536> t{};
    fenv_t env;  // the whole environment: x87's and SSE's (MXCSR) rounding both
    fegetenv(&env);
    fesetround(FE_TONEAREST);
    for (uint32_t a = 0; a < 256; ++a)
      for (uint32_t b = 0; b < 256; ++b) t[a << 8 | b] = Op<T>()(T{uint8_t(a)}, T{uint8_t(b)}).bits;
    fesetenv(&env);
    return t;
  }();
  return table.data();
}

namespace base {
constexpr int kLevel = 1;  // x86-64-v<kLevel>: 1 the baseline
#include "device/host_kernels_body.h"
}  // namespace base

#ifdef ACCL_HOST_X86_LEVELS
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
namespace x86v3 {
constexpr int kLevel = 3;
#include "device/host_kernels_body.h"
}  // namespace x86v3
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
namespace x86v4 {
constexpr int kLevel = 4;
#include "device/host_kernels_body.h"
}  // namespace x86v4
#pragma GCC pop_options
#endif

}  // namespace

#ifdef ACCL_HOST_X86_LEVELS
namespace {
// Every feature of x86-64-v3 (AVX, AVX2, BMI1, BMI2, F16C, FMA, LZCNT,
// MOVBE), one by one: GCC 11's __builtin_cpu_supports knows no levels, nor
// F16C, LZCNT or MOVBE, which CPUID gives. Its AVX features include the
// operating system's saving of the vector registers.
bool runsX86v3() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool f16c = c >> 29 & 1, movbe = c >> 22 & 1;
  if (!__get_cpuid(0x80000001, &a, &b, &c, &d)) return false;
  const bool lzcnt = c >> 5 & 1;
  return f16c && movbe && lzcnt && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
}
// x86-64-v4: v3 and AVX-512 F, BW, CD, DQ and VL.
bool runsX86v4() {
  return runsX86v3() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}
}  // namespace
#endif

bool hostIsaRuns(HostIsa isa) {
  switch (isa) {
    case HostIsa::Base: return true;
#ifdef ACCL_HOST_X86_LEVELS
    case HostIsa::X86v3: return runsX86v3();
    case HostIsa::X86v4: return runsX86v4();
#endif
    default: return false;
  }
}

const char* hostIsaName(HostIsa isa) {
  switch (isa) {
    case HostIsa::X86v3: return "x86-64-v3";
    case HostIsa::X86v4: return "x86-64-v4";
    default:
#ifdef __x86_64__
      return "x86-64";
#else
      return "baseline";
#endif
  }
}

bool hostKernelsOf(HostIsa isa, ncclDataType_t type, OpKind op, ReduceKernels* out) {
  switch (isa) {
#ifdef ACCL_HOST_X86_LEVELS
    case HostIsa::X86v3: return x86v3::kernels(type, op, out);
    case HostIsa::X86v4: return x86v4::kernels(type, op, out);
#endif
    default: return base::kernels(type, op, out);
  }
}

}  // namespace accl
