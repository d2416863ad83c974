// reduce_speed: how fast the host executor's reduction kernels run, per
// datatype and operation: combine(dst, a, b) over n elements, timed on buffers
// that stay in the core's cache (the host paths reduce in chunks of 32-128
// KiB) and on buffers far larger than the cache. Prints GB/s of memory traffic
// (two inputs read, one output written). ACCL_HOST_ISA picks the kernels'
// instruction set (design.md, "Reductions"), so one binary compares them.
//
//   reduce_speed [-d TYPE|all] [-o OP|all] [-s BYTES,BYTES,...] [-m MS]
//
// Built inside ACCL only: it calls the library's internal kernels (accl_static).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device/host_kernels.h"
#include "device/lowp.h"

namespace {

struct Named {
  const char* name;
  int value;
};
const Named kTypes[] = {{"int8", ncclInt8},         {"uint8", ncclUint8},       {"int32", ncclInt32},
                        {"uint32", ncclUint32},     {"int64", ncclInt64},       {"uint64", ncclUint64},
                        {"half", ncclFloat16},      {"float", ncclFloat32},     {"double", ncclFloat64},
                        {"bfloat16", ncclBfloat16}, {"f8e4m3", ncclFloat8e4m3}, {"f8e5m2", ncclFloat8e5m2}};

// Element i of an input: varied values (so that fp8's table lookups spread
// over its rows), none subnormal (whose arithmetic x86 takes a slow path
// for), none overflowing: 1 + (i mod 61)/64 for floating types, 1 + i mod 7
// for integers; `second` picks the other input's (1.5 + (i mod 53)/128, 1 + i mod 5).
void encode(ncclDataType_t type, size_t i, bool second, void* out) {
  const double v = second ? 1.5 + static_cast<double>(i % 53) / 128 : 1 + static_cast<double>(i % 61) / 64;
  const int64_t k = second ? 1 + static_cast<int64_t>(i % 5) : 1 + static_cast<int64_t>(i % 7);
  auto put = [&](auto x) { memcpy(out, &x, sizeof x); };
  switch (type) {
    case ncclInt8: put(static_cast<int8_t>(k)); break;
    case ncclUint8: put(static_cast<uint8_t>(k)); break;
    case ncclInt32: put(static_cast<int32_t>(k)); break;
    case ncclUint32: put(static_cast<uint32_t>(k)); break;
    case ncclInt64: put(static_cast<int64_t>(k)); break;
    case ncclUint64: put(static_cast<uint64_t>(k)); break;
    case ncclFloat16: put(accl::fromFloat<accl::half_t>(static_cast<float>(v))); break;
    case ncclFloat32: put(static_cast<float>(v)); break;
    case ncclFloat64: put(v); break;
    case ncclBfloat16: put(accl::fromFloat<accl::bf16_t>(static_cast<float>(v))); break;
    case ncclFloat8e4m3: put(accl::fromFloat<accl::fp8e4m3_t>(static_cast<float>(v))); break;
    default: put(accl::fromFloat<accl::fp8e5m2_t>(static_cast<float>(v))); break;
  }
}

const Named kOps[] = {{"sum", int(accl::OpKind::Sum)},
                      {"prod", int(accl::OpKind::Prod)},
                      {"max", int(accl::OpKind::Max)},
                      {"min", int(accl::OpKind::Min)},
                      {"premulsum", int(accl::OpKind::PreMulSum)},
                      {"avg", int(accl::OpKind::SumPostDiv)}};

size_t parseSize(const char* s, char** end) {
  double v = strtod(s, end);
  switch (**end) {
    case 'K': case 'k': v *= 1 << 10; ++*end; break;
    case 'M': case 'm': v *= 1 << 20; ++*end; break;
    case 'G': case 'g': v *= 1 << 30; ++*end; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

template <typename X, size_t N>
std::vector<X> pick(const X (&all)[N], const char* want, const char* what) {
  std::vector<X> out;
  for (const X& x : all)
    if (!strcmp(want, "all") || !strcmp(want, x.name)) out.push_back(x);
  if (out.empty()) {
    fprintf(stderr, "reduce_speed: unknown %s '%s'\n", what, want);
    exit(2);
  }
  return out;
}

// GB/s of traffic for combine over `bytes` per buffer: the best of repeated
// passes within `ms` milliseconds (the best pass is the kernel's own speed).
double speed(const accl::Reducer& red, ncclDataType_t type, size_t esize, size_t bytes, double ms) {
  const size_t n = bytes / esize;
  std::vector<unsigned char> a(bytes), b(bytes), d(bytes);
  for (size_t i = 0; i < n; ++i) {
    encode(type, i, false, &a[i * esize]);
    encode(type, i, true, &b[i * esize]);
  }
  using Clock = std::chrono::steady_clock;
  const auto stop = Clock::now() + std::chrono::duration<double, std::milli>(ms);
  const size_t reps = std::max<size_t>(1, (size_t{1} << 22) / std::max<size_t>(bytes, 1));
  double best = 1e30;
  do {
    const auto t0 = Clock::now();
    for (size_t r = 0; r < reps; ++r) red.combine(d.data(), a.data(), b.data(), n);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / reps);
  } while (Clock::now() < stop);
  volatile unsigned char sink = d[bytes / 2];
  (void)sink;
  return 3.0 * bytes / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const char* type = "all";
  const char* op = "sum";
  std::vector<size_t> sizes = {64 << 10, 64 << 20};
  double ms = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!value) {
      fprintf(stderr, "usage: reduce_speed [-d TYPE|all] [-o OP|all] [-s BYTES,...] [-m MS]\n");
      return 2;
    }
    ++i;
    if (flag == "-d") type = value;
    else if (flag == "-o") op = value;
    else if (flag == "-m") ms = atof(value);
    else if (flag == "-s") {
      sizes.clear();
      for (char* p = const_cast<char*>(value); *p;) {
        sizes.push_back(parseSize(p, &p));
        if (*p == ',') ++p;
        else if (*p) {
          fprintf(stderr, "reduce_speed: bad size list '%s'\n", value);
          return 2;
        }
      }
    } else {
      fprintf(stderr, "reduce_speed: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  printf("# host reduction kernels: %s; GB/s of traffic (2 reads + 1 write), best pass\n", accl::hostIsaName(accl::hostIsaInUse()));
  printf("%-9s %-9s", "type", "op");
  for (size_t s : sizes) printf(" %10zuB", s);
  printf("\n");
  for (const Named& t : pick(kTypes, type, "type")) {
    for (const Named& o : pick(kOps, op, "op")) {
      accl::Reducer red;
      red.kind = static_cast<accl::OpKind>(o.value);
      if (!accl::hostKernels(static_cast<ncclDataType_t>(t.value), red.kind, &red.k)) continue;
      red.scalar.f = 0.5;
      red.scalar.i = 2;
      printf("%-9s %-9s", t.name, o.name);
      const size_t es = accl::typeSize(static_cast<ncclDataType_t>(t.value));
      for (size_t s : sizes) printf(" %11.1f", speed(red, static_cast<ncclDataType_t>(t.value), es, s / es * es, ms));
      printf("\n");
      fflush(stdout);
    }
  }
  return 0;
}
