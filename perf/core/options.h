// Command-line options, with nccl-tests' letters, long names, defaults and meaning.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/types.h"

namespace perf {

struct Options {
  int nThreads = 1;                 // -t  threads per process
  int nGpus = 1;                    // -g  ranks ("GPUs") per thread
  size_t minBytes = 32 << 20;       // -b
  size_t maxBytes = 32 << 20;       // -e
  size_t stepBytes = 1 << 20;       // -i  used when stepFactor == 1
  size_t stepFactor = 1;            // -f
  int iters = 20;                   // -n
  int aggIters = 1;                 // -m  collectives per iteration, in one group
  int warmupIters = 1;              // -w
  int runCycles = 1;                // -N  sweeps (0: until stopped)
  int check = 1;                    // -c  checked iterations per size (0: no check)
  std::vector<Op> ops{Op::Sum};     // -o  (all: every operator)
  bool allOps = false;
  std::vector<ncclDataType_t> types{ncclFloat32};  // -d  (all: every datatype)
  bool allTypes = false;
  int root = 0;                     // -r  (-1 or "all": every root)
  int blocking = 0;                 // -z  wait and barrier after each collective
  int streamNull = 0;               // -y  use the default stream (device mode)
  int cudaGraphs = 0;               // -G  launches of the captured iterations (device mode)
  int reportCpuTime = 0;            // -C
  int average = 1;                  // -a  0 rank 0, 1 mean, 2 min, 3 max
  int parallelInit = 0;             // -p  accepted; every thread creates its own ranks anyway
  int timeoutSec = 600;             // -T  watchdog: seconds without progress (0: none)
  int registerMode = 0;             // -R  0 none, 1 ncclCommRegister, 2 symmetric windows (ncclMemAlloc'd)
  std::string jsonFile;             // -J
  std::string csvFile;              // --csv
};

// Parses argv into *out. Returns -1 to go on, otherwise the exit status
// (0 after --help, 2 after a bad option, with the message on stderr).
int parseOptions(int argc, char** argv, const char* program, Options* out);

}  // namespace perf
