#include "core/options.h"

#include <getopt.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace perf {
namespace {

// A size with an optional K/M/G suffix (binary units, as nccl-tests).
bool parseSize(const char* text, size_t* out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (end == text || errno != 0 || !(v >= 0)) return false;
  double unit = 1;
  if (*end) {
    switch (*end) {
      case 'k': case 'K': unit = 1024.0; break;
      case 'm': case 'M': unit = 1024.0 * 1024; break;
      case 'g': case 'G': unit = 1024.0 * 1024 * 1024; break;
      default: return false;
    }
    if (end[1] && !((end[1] == 'b' || end[1] == 'B') && !end[2])) return false;
  }
  double bytes = v * unit;
  if (bytes > 1e18) return false;
  *out = size_t(bytes);
  return true;
}

bool parseInt(const char* text, long lo, long hi, long* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 0);
  if (end == text || *end || errno != 0 || v < lo || v > hi) return false;
  *out = v;
  return true;
}

void usage(const char* program, FILE* f) {
  std::fprintf(f,
      "USAGE: %s\n"
      "\t[-t,--nthreads <num threads>]\n"
      "\t[-g,--ngpus <gpus (ranks) per thread>]\n"
      "\t[-b,--minbytes <min size in bytes, K/M/G suffixes>]\n"
      "\t[-e,--maxbytes <max size in bytes>]\n"
      "\t[-i,--stepbytes <increment size>]\n"
      "\t[-f,--stepfactor <increment factor>]\n"
      "\t[-n,--iters <iteration count>]\n"
      "\t[-m,--agg_iters <aggregated iteration count>]\n"
      "\t[-w,--warmup_iters <warmup iteration count>]\n"
      "\t[-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)]\n"
      "\t[-p,--parallel_init <0/1>]\n"
      "\t[-c,--check <check iteration count>]\n"
      "\t[-o,--op <sum/prod/min/max/avg/mulsum/all>]\n"
      "\t[-d,--datatype <nccltype/all>]\n"
      "\t[-r,--root <root/all>]\n"
      "\t[-z,--blocking <0/1>]\n"
      "\t[-y,--stream_null <0/1>]\n"
      "\t[-T,--timeout <seconds without progress before the watchdog stops the run; 0=none; default 600>]\n"
      "\t[-G,--cudagraph <num graph launches>]\n"
      "\t[-C,--report_cputime <0/1>]\n"
      "\t[-R,--local_register <0/1/2> register the buffers: 1 ncclCommRegister, 2 symmetric windows]\n"
      "\t[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>]\n"
      "\t[-J,--output_file <file> write the results as JSON]\n"
      "\t[--csv <file> write the results as CSV]\n"
      "\t[-h,--help]\n",
      program);
}

int bad(const char* program, const char* what, const char* value) {
  std::fprintf(stderr, "%s: invalid value '%s' for %s (see --help)\n", program, value, what);
  return 2;
}

}  // namespace

int parseOptions(int argc, char** argv, const char* program, Options* o) {
  enum { kCsv = 1000 };
  static const struct option longopts[] = {
      {"nthreads", required_argument, nullptr, 't'},     {"ngpus", required_argument, nullptr, 'g'},
      {"minbytes", required_argument, nullptr, 'b'},     {"maxbytes", required_argument, nullptr, 'e'},
      {"stepbytes", required_argument, nullptr, 'i'},    {"stepfactor", required_argument, nullptr, 'f'},
      {"iters", required_argument, nullptr, 'n'},        {"agg_iters", required_argument, nullptr, 'm'},
      {"warmup_iters", required_argument, nullptr, 'w'}, {"run_cycles", required_argument, nullptr, 'N'},
      {"parallel_init", required_argument, nullptr, 'p'}, {"check", required_argument, nullptr, 'c'},
      {"op", required_argument, nullptr, 'o'},           {"datatype", required_argument, nullptr, 'd'},
      {"root", required_argument, nullptr, 'r'},         {"blocking", required_argument, nullptr, 'z'},
      {"stream_null", required_argument, nullptr, 'y'},  {"timeout", required_argument, nullptr, 'T'},
      {"cudagraph", required_argument, nullptr, 'G'},    {"report_cputime", required_argument, nullptr, 'C'},
      {"average", required_argument, nullptr, 'a'},      {"output_file", required_argument, nullptr, 'J'},
      {"local_register", required_argument, nullptr, 'R'},
      {"csv", required_argument, nullptr, kCsv},         {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  opterr = 0;
  optind = 1;
  long v = 0;
  for (;;) {
    int c = getopt_long(argc, argv, ":t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:a:J:R:h", longopts, nullptr);
    if (c == -1) break;
    const char* arg = optarg;
    switch (c) {
      case 't': if (!parseInt(arg, 1, 1024, &v)) return bad(program, "-t (threads)", arg); o->nThreads = int(v); break;
      case 'g': if (!parseInt(arg, 1, 1024, &v)) return bad(program, "-g (gpus per thread)", arg); o->nGpus = int(v); break;
      case 'b': if (!parseSize(arg, &o->minBytes)) return bad(program, "-b (minbytes)", arg); break;
      case 'e': if (!parseSize(arg, &o->maxBytes)) return bad(program, "-e (maxbytes)", arg); break;
      case 'i': if (!parseSize(arg, &o->stepBytes)) return bad(program, "-i (stepbytes)", arg); break;
      case 'f': if (!parseInt(arg, 1, 1 << 20, &v)) return bad(program, "-f (stepfactor)", arg); o->stepFactor = size_t(v); break;
      case 'n': if (!parseInt(arg, 1, 1 << 30, &v)) return bad(program, "-n (iters)", arg); o->iters = int(v); break;
      case 'm': if (!parseInt(arg, 1, 1 << 20, &v)) return bad(program, "-m (agg_iters)", arg); o->aggIters = int(v); break;
      case 'w': if (!parseInt(arg, 0, 1 << 30, &v)) return bad(program, "-w (warmup_iters)", arg); o->warmupIters = int(v); break;
      case 'N': if (!parseInt(arg, 0, 1 << 30, &v)) return bad(program, "-N (run_cycles)", arg); o->runCycles = int(v); break;
      case 'p': if (!parseInt(arg, 0, 1, &v)) return bad(program, "-p (parallel_init)", arg); o->parallelInit = int(v); break;
      case 'c': if (!parseInt(arg, 0, 1 << 20, &v)) return bad(program, "-c (check)", arg); o->check = int(v); break;
      case 'z': if (!parseInt(arg, 0, 1, &v)) return bad(program, "-z (blocking)", arg); o->blocking = int(v); break;
      case 'y': if (!parseInt(arg, 0, 1, &v)) return bad(program, "-y (stream_null)", arg); o->streamNull = int(v); break;
      case 'T': if (!parseInt(arg, 0, 1 << 24, &v)) return bad(program, "-T (timeout)", arg); o->timeoutSec = int(v); break;
      case 'G': if (!parseInt(arg, 0, 1 << 20, &v)) return bad(program, "-G (cudagraph)", arg); o->cudaGraphs = int(v); break;
      case 'C': if (!parseInt(arg, 0, 1, &v)) return bad(program, "-C (report_cputime)", arg); o->reportCpuTime = int(v); break;
      case 'a': if (!parseInt(arg, 0, 3, &v)) return bad(program, "-a (average)", arg); o->average = int(v); break;
      case 'R': if (!parseInt(arg, 0, 2, &v)) return bad(program, "-R (local_register)", arg); o->registerMode = int(v); break;
      case 'J': o->jsonFile = arg; break;
      case kCsv: o->csvFile = arg; break;
      case 'o': {
        Op op;
        if (std::strcmp(arg, "all") == 0) {
          o->ops = allOps();
          o->allOps = true;
        } else if (parseOp(arg, &op)) {
          o->ops = {op};
          o->allOps = false;
        } else {
          return bad(program, "-o (op: sum/prod/min/max/avg/mulsum/all)", arg);
        }
        break;
      }
      case 'd': {
        ncclDataType_t t;
        if (std::strcmp(arg, "all") == 0) {
          o->types = allTypes();
          o->allTypes = true;
        } else if (parseType(arg, &t)) {
          o->types = {t};
          o->allTypes = false;
        } else {
          return bad(program,
                     "-d (datatype: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 "
                     "f8e5m2 all)", arg);
        }
        break;
      }
      case 'r':
        if (std::strcmp(arg, "all") == 0) {
          o->root = -1;
        } else if (parseInt(arg, -1, 1 << 30, &v)) {
          o->root = int(v);
        } else {
          return bad(program, "-r (root: a rank, -1 or all)", arg);
        }
        break;
      case 'h': usage(program, stdout); return 0;
      case ':':
        std::fprintf(stderr, "%s: option '%s' needs a value (see --help)\n", program, argv[optind - 1]);
        return 2;
      default:
        std::fprintf(stderr, "%s: unknown option '%s' (see --help)\n", program, argv[optind - 1]);
        return 2;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", program, argv[optind]);
    return 2;
  }
  if (o->minBytes > o->maxBytes) {
    std::fprintf(stderr, "%s: invalid sizes for 'minbytes' and 'maxbytes': %zu > %zu\n", program, o->minBytes,
                 o->maxBytes);
    return 2;
  }
  if (o->stepFactor <= 1 && o->stepBytes == 0 && o->minBytes < o->maxBytes) {
    std::fprintf(stderr, "%s: -i (stepbytes) must be > 0 when -f (stepfactor) is 1\n", program);
    return 2;
  }
  if (o->stepFactor > 1 && o->minBytes == 0 && o->maxBytes > 0) {
    std::fprintf(stderr, "%s: -b (minbytes) must be > 0 with -f (stepfactor) > 1\n", program);
    return 2;
  }
  return -1;
}

}  // namespace perf
