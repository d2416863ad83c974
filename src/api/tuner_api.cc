// acclTunerPredict / acclTunerChoose: the tuner's model, for comparison with measurements.
#include "api/api.h"

#include <strings.h>

#include <cstdio>

#include "base/check.h"
#include "coll/tuner.h"

namespace {

bool kindOf(const char* name, accl::CollKind* kind) {
  static const struct { const char* name; accl::CollKind kind; } kKinds[] = {
      {"allreduce", accl::CollKind::AllReduce}, {"broadcast", accl::CollKind::Broadcast},
      {"reduce", accl::CollKind::Reduce}, {"allgather", accl::CollKind::AllGather},
      {"reducescatter", accl::CollKind::ReduceScatter}, {"sendrecv", accl::CollKind::Send}};
  for (const auto& k : kKinds)
    if (name && strcasecmp(name, k.name) == 0) {
      *kind = k.kind;
      return true;
    }
  return false;
}

ncclResult_t checkShape(const char* fn, const char* collective, int nranks, int nhosts, accl::CollKind* kind) {
  if (!kindOf(collective, kind)) {
    WARN("%s: unknown collective '%s' (allreduce, broadcast, reduce, allgather, reducescatter, sendrecv)", fn,
         collective ? collective : "(null)");
    return ncclInvalidArgument;
  }
  if (nranks < 1 || nhosts < 1 || nhosts > nranks) {
    WARN("%s: nranks = %d, nhosts = %d: need 1 <= nhosts <= nranks", fn, nranks, nhosts);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

// The hierarchical allreduce's shape, as far as counts tell: several hosts of
// as many ranks each, two or more.
bool hierFits(int nranks, int nhosts) { return nhosts >= 2 && nranks % nhosts == 0 && nranks / nhosts >= 2; }

}  // namespace

extern "C" ncclResult_t acclTunerPredict(const char* collective, const char* algorithm, size_t bytes, int nranks,
                                         int nhosts, double* microseconds) {
  accl::CollKind kind;
  NCCLCHECK(checkShape("acclTunerPredict", collective, nranks, nhosts, &kind));
  if (!microseconds) {
    WARN("acclTunerPredict: microseconds is NULL");
    return ncclInvalidArgument;
  }
  accl::Algo algo;
  const bool allreduce = kind == accl::CollKind::AllReduce;
  if (algorithm && strcasecmp(algorithm, "ring") == 0) algo = accl::Algo::Ring;
  else if (algorithm && strcasecmp(algorithm, "tree") == 0 && allreduce)
    algo = accl::Algo::Tree;
  else if (algorithm && strcasecmp(algorithm, "hier") == 0 && accl::hasHier(kind) && hierFits(nranks, nhosts))
    algo = accl::Algo::Hier;
  else {
    WARN("acclTunerPredict: algorithm '%s' is not available for %s on %d ranks, %d hosts (ring%s%s)",
         algorithm ? algorithm : "(null)", collective, nranks, nhosts, allreduce ? ", tree" : "",
         accl::hasHier(kind) && hierFits(nranks, nhosts) ? ", hier" : "");
    return ncclInvalidArgument;
  }
  *microseconds = accl::predictUs(kind, algo, bytes, nranks, nhosts);
  return ncclSuccess;
}

extern "C" ncclResult_t acclTunerChoose(const char* collective, size_t bytes, int nranks, int nhosts,
                                        char* algorithm, size_t len) {
  accl::CollKind kind;
  NCCLCHECK(checkShape("acclTunerChoose", collective, nranks, nhosts, &kind));
  if (!algorithm || len < 5) {
    WARN("acclTunerChoose: algorithm buffer is NULL or shorter than 5 bytes");
    return ncclInvalidArgument;
  }
  const bool allreduce = kind == accl::CollKind::AllReduce;
  const accl::Algo best =
      accl::fastestAlgo(kind, bytes, nranks, nhosts, true, allreduce, accl::hasHier(kind) && hierFits(nranks, nhosts));
  snprintf(algorithm, len, "%s", accl::algoName(best));
  return ncclSuccess;
}
