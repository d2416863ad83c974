#include "core/shared.h"

#include <cstdio>
#include <mutex>

namespace perf {
namespace {
std::mutex gFailMutex;  // one message, even when several threads fail together
}

std::string lastError(ncclComm_t comm) {
  const char* e = ncclGetLastError(comm);
  return e ? e : "";
}

void failRank(const Shared& s, int rank, const std::string& what) {
  gFailMutex.lock();  // never unlocked: the process ends here
  std::fflush(stdout);
  std::fprintf(stderr, "%s: rank %d: %s\n", s.coll->program, rank, what.c_str());
  s.world->abortAll(1);
}

void failCall(const Shared& s, int rank, const char* call, ncclResult_t r, ncclComm_t comm) {
  std::string msg = std::string(call) + " failed: " + ncclGetErrorString(r);
  std::string last = lastError(comm);
  if (!last.empty()) msg += " (" + last + ")";
  failRank(s, rank, msg);
}

}  // namespace perf
