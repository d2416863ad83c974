#include "core/group.h"

#include <map>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/comm.h"

namespace accl {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<std::function<ncclResult_t()>> inits;
  std::vector<CollArgs> colls;
};

thread_local GroupState tlsGroup;

// Runs jobs concurrently (inline when there is one) and returns the first error.
ncclResult_t runConcurrently(const std::vector<std::function<ncclResult_t()>>& jobs) {
  if (jobs.empty()) return ncclSuccess;
  if (jobs.size() == 1) return jobs[0]();
  std::vector<ncclResult_t> results(jobs.size(), ncclSuccess);
  std::vector<std::thread> threads;
  threads.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) threads.emplace_back([&, i] { results[i] = jobs[i](); });
  for (auto& t : threads) t.join();
  for (ncclResult_t r : results)
    if (r != ncclSuccess) return r;
  return ncclSuccess;
}

}  // namespace

bool groupActive() { return tlsGroup.depth > 0; }

ncclResult_t groupStart() {
  ++tlsGroup.depth;
  return ncclSuccess;
}

ncclResult_t groupEnd() {
  GroupState& g = tlsGroup;
  if (g.depth == 0) {
    WARN("ncclGroupEnd: not inside a group (ncclGroupStart was not called)");
    return ncclInvalidUsage;
  }
  if (--g.depth > 0) return ncclSuccess;
  auto inits = std::move(g.inits);
  auto colls = std::move(g.colls);
  g.inits.clear();
  g.colls.clear();
  NCCLCHECK(runConcurrently(inits));
  // Per communicator, in call order.
  std::map<ncclComm*, std::vector<CollArgs>> byComm;
  std::vector<ncclComm*> order;
  for (const CollArgs& a : colls) {
    if (!byComm.count(a.comm)) order.push_back(a.comm);
    byComm[a.comm].push_back(a);
  }
  std::vector<std::function<ncclResult_t()>> jobs;
  for (ncclComm* c : order) {
    jobs.push_back([c, list = byComm[c]] {
      CommUse use(c);
      for (const CollArgs& a : list) {
        NCCLCHECK(runCollective(a));
        ++c->opCount;
      }
      return ncclSuccess;
    });
  }
  return runConcurrently(jobs);
}

void groupEnqueueInit(std::function<ncclResult_t()> init) { tlsGroup.inits.push_back(std::move(init)); }
void groupEnqueueColl(const CollArgs& args) { tlsGroup.colls.push_back(args); }

}  // namespace accl
