// reduce_speed: how fast the host executor's reduction kernels run, per
// datatype and operation: combine(dst, a, b) over n elements, timed on buffers
// that stay in the core's cache (the host paths reduce in chunks of 32-128
// KiB) and on buffers far larger than the cache. Prints GB/s of memory traffic
// (two inputs read, one output written). ACCL_HOST_ISA picks the kernels'
// instruction set (design.md, "Host reductions"), so one binary compares them.
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

namespace {

struct Named {
  const char* name;
  int value;
};
// Each type's name, and the encodings of 1 and 1.5 (of 1 and 1 for the integers), little-endian.
struct Type {
  const char* name;
  int value;
  uint64_t one, oneAndHalf;
};
const Type kTypes[] = {{"int8", ncclInt8, 1, 1},
                       {"uint8", ncclUint8, 1, 1},
                       {"int32", ncclInt32, 1, 1},
                       {"uint32", ncclUint32, 1, 1},
                       {"int64", ncclInt64, 1, 1},
                       {"uint64", ncclUint64, 1, 1},
                       {"half", ncclFloat16, 0x3c00, 0x3e00},
                       {"float", ncclFloat32, 0x3f800000, 0x3fc00000},
                       {"double", ncclFloat64, 0x3ff0000000000000, 0x3ff8000000000000},
                       {"bfloat16", ncclBfloat16, 0x3f80, 0x3fc0},
                       {"f8e4m3", ncclFloat8e4m3, 0x38, 0x3c},
                       {"f8e5m2", ncclFloat8e5m2, 0x3c, 0x3e}};
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
double speed(const accl::Reducer& red, size_t esize, const void* one, const void* oneAndHalf, size_t bytes,
             double ms) {
  const size_t n = bytes / esize;
  std::vector<unsigned char> a(bytes), b(bytes), d(bytes);
  for (size_t i = 0; i + esize <= bytes; i += esize) {  // 1 and 1.5 (1 for integers): no subnormal, no overflow
    memcpy(&a[i], one, esize);
    memcpy(&b[i], oneAndHalf, esize);
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
  for (const Type& t : pick(kTypes, type, "type")) {
    for (const Named& o : pick(kOps, op, "op")) {
      accl::Reducer red;
      red.kind = static_cast<accl::OpKind>(o.value);
      if (!accl::hostKernels(static_cast<ncclDataType_t>(t.value), red.kind, &red.k)) continue;
      red.scalar.f = 0.5;
      red.scalar.i = 2;
      printf("%-9s %-9s", t.name, o.name);
      const size_t es = accl::typeSize(static_cast<ncclDataType_t>(t.value));
      for (size_t s : sizes) printf(" %11.1f", speed(red, es, &t.one, &t.oneAndHalf, s / es * es, ms));
      printf("\n");
      fflush(stdout);
    }
  }
  return 0;
}
