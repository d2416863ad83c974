#include "init/group.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <memory>
#include <vector>

#include "base/check.h"
#include "base/workers.h"
#include "coll/coll.h"
#include "coll/dev_comm.h"
#include "coll/tuner.h"
#include "core/comm.h"
#include "core/self_wait.h"

namespace accl {
namespace {

struct GroupState {
  int blocking = -1;  // of the communicators queued so far (-1: none yet)
  ncclResult_t error = ncclSuccess;  // the first call that failed inside the group
  struct Init {
    std::function<ncclResult_t()> run;
    std::function<void(ncclResult_t)> cancel;  // or empty
    const ncclComm* parent;                    // split, shrink; or NULL
  };
  std::vector<Init> inits;
  std::vector<std::pair<ncclComm*, std::function<ncclResult_t()>>> commJobs;  // in call order
  std::vector<CollArgs> colls;

  void clear() {
    blocking = -1;
    error = ncclSuccess;
    inits.clear();
    commJobs.clear();
    colls.clear();
  }
};

// A shared library reaches each thread-local through a call (__tls_get_addr),
// and one with a constructor through a second for its guard, at every access
// the compiler cannot prove repeated: the depth, asked by every call, is a
// plain int, and the rest is reached once per function through threadGroup().
thread_local int tlsDepth = 0;

__attribute__((noinline)) GroupState& threadGroup() {
  thread_local GroupState state;
  return state;
}

// The items of each communicator, in call order, the communicators in the
// order of their first item.
template <typename T, typename CommOf>
std::vector<std::pair<ncclComm*, std::vector<T>>> byCommInOrder(const std::vector<T>& items, CommOf commOf) {
  std::vector<std::pair<ncclComm*, std::vector<T>>> parts;
  std::map<ncclComm*, size_t> at;
  for (const T& item : items) {
    ncclComm* c = commOf(item);
    auto [it, added] = at.emplace(c, parts.size());
    if (added) parts.emplace_back(c, std::vector<T>());
    parts[it->second].second.push_back(item);
  }
  return parts;
}

// Jobs that never ran (no thread could start for them) leave their peers
// waiting: their communicators fail, which tells the peers.
void failNeverRan(const std::vector<ncclComm*>& comms, ncclResult_t error) {
  for (ncclComm* c : comms)
    if (const auto use = CommUse::ifLive(c)) commSetError(c, error);
}

// Each communicator's jobs in call order on a thread of their own, the
// communicators concurrently (a job may wait for ranks driven by another).
ncclResult_t runCommJobs(const std::vector<std::pair<ncclComm*, std::function<ncclResult_t()>>>& jobs) {
  auto parts = byCommInOrder(jobs, [](const auto& job) { return job.first; });
  std::vector<std::function<ncclResult_t()>> perComm;
  std::vector<ncclComm*> comms;
  for (const auto& part : parts) {
    comms.push_back(part.first);
    perComm.push_back([&part] {
      for (const auto& job : part.second) NCCLCHECK(job.second());
      return ncclSuccess;
    });
  }
  bool ran = true;
  const ncclResult_t r = runConcurrently(perComm, &ran);
  if (!ran) failNeverRan(comms, r);  // their peers wait in the registrations
  return r;
}

// One communicator's part of a group: collectives in order, then the p2p batch.
ncclResult_t runCommOps(ncclComm* c, const std::vector<CollArgs>& ops) {
  const auto use = CommUse::ifLive(c);
  if (!use) return commGone(c, "ncclGroupEnd");
  bool onlyP2p = true;
  for (const CollArgs& a : ops) onlyP2p = onlyP2p && isP2p(a.kind);
  if (onlyP2p) {  // the common group (sends and receives): no copy of the list
    NCCLCHECK(runP2p(c, ops));
    ++c->opCount;
    return ncclSuccess;
  }
  std::vector<CollArgs> p2p;
  for (const CollArgs& a : ops) {
    if (isP2p(a.kind)) {
      p2p.push_back(a);
      continue;
    }
    NCCLCHECK(runCollective(a));
    ++c->opCount;
  }
  if (!p2p.empty()) {
    NCCLCHECK(runP2p(c, p2p));
    ++c->opCount;
  }
  return ncclSuccess;
}

}  // namespace

bool groupActive() { return tlsDepth > 0; }

ncclResult_t groupStart() {
  ++tlsDepth;
  return ncclSuccess;
}

ncclResult_t groupEnd() {
  GroupState& g = threadGroup();
  if (tlsDepth == 0) {
    WARN("ncclGroupEnd: not inside a group (ncclGroupStart was not called)");
    return ncclInvalidUsage;
  }
  if (--tlsDepth > 0) return ncclSuccess;
  if (g.error != ncclSuccess) {
    const ncclResult_t error = g.error;
    auto inits = std::move(g.inits);
    g.clear();
    WARN("ncclGroupEnd: a call inside the group failed (error %d, see above): nothing queued in the group ran, "
         "and its inits failed", static_cast<int>(error));
    for (auto& init : inits)
      if (init.cancel) init.cancel(error);
    return error;
  }
  std::vector<std::function<ncclResult_t()>> inits;
  std::vector<std::function<void(ncclResult_t)>> cancels;
  for (auto& init : g.inits) {
    inits.push_back(std::move(init.run));
    if (init.cancel) cancels.push_back(std::move(init.cancel));
  }
  auto commJobs = std::move(g.commJobs);
  std::vector<CollArgs> colls;
  colls.swap(g.colls);
  g.clear();
  // The list's memory goes back to the thread's next group, so that a loop of
  // small groups does not allocate it every time.
  struct Recycle {
    std::vector<CollArgs>& list;
    GroupState& owner;
    ~Recycle() {
      list.clear();
      if (tlsDepth == 0 && owner.colls.empty()) owner.colls.swap(list);
    }
  } recycle{colls, g};
  if (!inits.empty()) {
    bool ran = true;
    const ncclResult_t r = runConcurrently(inits, &ran);
    if (!ran)  // no thread to run them on: they fail as a failed group's inits do
      for (auto& cancel : cancels) cancel(r);
    NCCLCHECK(r);
  }
  if (!commJobs.empty()) NCCLCHECK(runCommJobs(commJobs));
  if (!colls.empty() && colls.front().comm == colls.back().comm) {
    bool oneComm = true;
    for (const CollArgs& a : colls) oneComm = oneComm && a.comm == colls.front().comm;
    if (oneComm) {  // on this thread either way (below)
      ncclComm* c = colls.front().comm;
      const auto use = CommUse::ifLive(c);
      if (!use) return commGone(c, "ncclGroupEnd");
      SelfWaitCall calling(c);
      return runCommOps(c, colls);
    }
  }
  auto parts = byCommInOrder(colls, [](const CollArgs& a) { return a.comm; });
  // Every communicator of the group is in a call of this thread before any
  // part runs: a part that waits for another's rank must not find it idle.
  std::vector<std::unique_ptr<CommUse>> callPins;
  std::vector<std::unique_ptr<SelfWaitCall>> calls;
  for (const auto& part : parts) {
    std::unique_ptr<CommUse> use(new CommUse(CommUse::ifLive(part.first)));
    if (!*use) continue;  // its part says so below
    calls.emplace_back(new SelfWaitCall(part.first));
    callPins.push_back(std::move(use));
  }
  // Parts of one collective, or of one send and one receive, on device
  // buffers: every rank of a communicator in this process on one GPU may run
  // as one launch (coll/dev_coll.cc), where the set's first part would run.
  std::vector<std::unique_ptr<CommUse>> pins;  // while a set waits for its turn
  std::vector<GroupPart> small;
  std::vector<size_t> smallAt;  // their places in `parts`
  if (devGroupLaunch()) {
    for (size_t i = 0; i < parts.size(); ++i) {
      const auto& ops = parts[i].second;
      const bool coll = ops.size() == 1 && !isP2p(ops[0].kind);
      const bool pair = ops.size() == 2 && isP2p(ops[0].kind) && isP2p(ops[1].kind);
      if (!(coll || pair) || !ops[0].onDevice || !ops.back().onDevice) continue;
      std::unique_ptr<CommUse> use(new CommUse(CommUse::ifLive(parts[i].first)));
      // Sends and receives whose connections are not made yet take the usual
      // way once, which makes them: a launch per rank needs them later (a
      // graph per stream cannot make them while capturing).
      if (!*use || (pair && !devQueuesOnly(parts[i].first, ops))) continue;
      small.emplace_back(parts[i].first, &ops);
      smallAt.push_back(i);
      pins.push_back(std::move(use));
    }
  }
  const auto sets = small.size() > 1 ? devTogetherSets(small) : std::vector<TogetherSet>{};
  std::vector<const TogetherSet*> setAt(parts.size(), nullptr);  // by place: the set it belongs to
  for (const TogetherSet& set : sets)
    for (size_t k : set.parts) setAt[smallAt[k]] = &set;
  // A part that only queues kernels runs here; the others need a thread each,
  // since each may wait for peers that another part of this group serves.
  std::vector<std::function<ncclResult_t()>> jobs;
  std::vector<ncclComm*> threaded;  // the communicators of `jobs`
  ncclResult_t first = ncclSuccess;
  std::vector<bool> done(parts.size(), false);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (done[i]) continue;
    const auto& [c, ops] = parts[i];
    if (const TogetherSet* set = setAt[i]) {
      const ncclResult_t r = devRunTogether(small, *set);
      for (size_t k : set->parts) {
        done[smallAt[k]] = true;
        ++small[k].first->opCount;
      }
      if (first == ncclSuccess) first = r;
      continue;
    }
    const auto use = CommUse::ifLive(c);  // devQueuesOnly reads it; runCommOps pins it again
    if (!use) {
      if (first == ncclSuccess) first = commGone(c, "ncclGroupEnd");
      continue;
    }
    if (!devQueuesOnly(c, ops)) {
      jobs.push_back([c = c, &ops = ops] { return runCommOps(c, ops); });
      threaded.push_back(c);
      continue;
    }
    ncclResult_t r = runCommOps(c, ops);
    if (first == ncclSuccess) first = r;
  }
  pins.clear();  // every set is enqueued; the threaded jobs pin their own
  bool ran = true;
  ncclResult_t r = runConcurrently(jobs, &ran);
  if (!ran) failNeverRan(threaded, r);
  return first != ncclSuccess ? first : r;
}

ncclResult_t groupSimulateEnd(ncclSimInfo_t* info) {
  GroupState& g = threadGroup();
  if (!info) {
    WARN("ncclGroupSimulateEnd: simInfo is NULL");
    return ncclInvalidArgument;
  }
  if (info->magic != 0x74685283u || info->size < sizeof(size_t) + 2 * sizeof(unsigned) + sizeof(float)) {
    WARN("ncclGroupSimulateEnd: simInfo was not initialised with NCCL_SIM_INFO_INITIALIZER (size %zu, magic 0x%x)",
         info->size, info->magic);
    return ncclInvalidArgument;
  }
  if (tlsDepth == 0) {
    WARN("ncclGroupSimulateEnd: not inside a group (ncclGroupStart was not called)");
    return ncclInvalidUsage;
  }
  if (--tlsDepth > 0) return ncclSuccess;
  // Per communicator the operations run one after another; communicators run in parallel.
  std::map<ncclComm*, double> perComm;
  for (const CollArgs& a : g.colls) {
    const auto use = CommUse::ifLive(a.comm);  // another thread may have destroyed it since the call was queued
    if (!use) continue;
    Algo algo = isP2p(a.kind) ? Algo::Ring : chooseAlgo(a);
    if (algo == Algo::Default) algo = Algo::Ring;
    perComm[a.comm] += predictUs(a.kind, algo, a.count * typeSize(a.type), a.comm->nranks, a.comm->nhosts);
  }
  double us = 0;
  for (auto& kv : perComm) us = std::max(us, kv.second);
  info->estimatedTime = static_cast<float>(us);
  // Simulation is for operations (as NCCL's): queued inits never start, and
  // their communicators say so rather than stay "in progress" for good.
  auto inits = std::move(g.inits);
  const ncclResult_t error = g.error;  // a call inside the group failed: so does its end, simulated or not
  g.clear();
  if (!inits.empty())
    WARN("ncclGroupSimulateEnd: %zu init(s) queued in the group never start; destroy their communicators",
         inits.size());
  for (auto& init : inits)
    if (init.cancel) init.cancel(error != ncclSuccess ? error : ncclInvalidUsage);
  return error;
}

void groupDiscard() {
  GroupState& g = threadGroup();
  if (tlsDepth > 0 && --tlsDepth == 0) g.clear();
}

int groupForget(const ncclComm* comm) {
  if (tlsDepth == 0) return 0;
  GroupState& g = threadGroup();
  const size_t before = g.colls.size() + g.commJobs.size();
  g.colls.erase(std::remove_if(g.colls.begin(), g.colls.end(), [comm](const CollArgs& a) { return a.comm == comm; }),
                g.colls.end());
  g.commJobs.erase(std::remove_if(g.commJobs.begin(), g.commJobs.end(),
                                  [comm](const auto& job) { return job.first == comm; }),
                   g.commJobs.end());
  int dropped = static_cast<int>(before - g.colls.size() - g.commJobs.size());
  std::vector<GroupState::Init> children;  // cancelled once the list is consistent again
  auto fromComm = std::stable_partition(g.inits.begin(), g.inits.end(),
                                        [comm](const GroupState::Init& i) { return i.parent != comm; });
  std::move(fromComm, g.inits.end(), std::back_inserter(children));
  g.inits.erase(fromComm, g.inits.end());
  dropped += static_cast<int>(children.size());
  for (auto& child : children)
    if (child.cancel) child.cancel(ncclInvalidUsage);
  return dropped;
}

ncclResult_t groupFail(ncclResult_t r) {
  if (r != ncclSuccess && r != ncclInProgress && tlsDepth > 0) {
    GroupState& g = threadGroup();
    if (g.error == ncclSuccess) g.error = r;
  }
  return r;
}

namespace {

// Every communicator a group queues work or an init on must be blocking, or
// every one non-blocking (as NCCL): the group's end either waits for all or
// returns ncclInProgress for all.
ncclResult_t sameBlocking(GroupState& g, bool blocking, const char* fn, const std::string& name) {
  if (g.blocking >= 0 && g.blocking != (blocking ? 1 : 0)) {
    WARN("%s: a group may not mix blocking and non-blocking communicators (%s is %s)", fn, name.c_str(),
         blocking ? "blocking" : "non-blocking");
    return groupFail(ncclInvalidUsage);
  }
  g.blocking = blocking ? 1 : 0;
  return ncclSuccess;
}

}  // namespace

ncclResult_t groupEnqueueInit(std::function<ncclResult_t()> init, std::function<void(ncclResult_t)> cancel,
                              const ncclComm* parent, const ncclComm* made, const char* fn) {
  GroupState& g = threadGroup();
  g.inits.push_back({std::move(init), std::move(cancel), parent});
  // Queued even when refused: the failed group's end then fails its init too.
  if (!made) return ncclSuccess;
  const std::string& named = made->config.commName;  // it has no name of its own before its init
  return sameBlocking(g, made->config.blocking, fn, named.empty() ? "the new communicator" : named);
}

void groupEnqueueCommJob(ncclComm* comm, std::function<ncclResult_t()> job) {
  threadGroup().commJobs.emplace_back(comm, std::move(job));
}

ncclResult_t groupEnqueueColl(const CollArgs& args) {
  GroupState& g = threadGroup();
  NCCLCHECK(sameBlocking(g, args.comm->config.blocking, args.opName, args.comm->name));
  selfWaitIssued(args.comm);
  g.colls.push_back(args);
  return ncclSuccess;
}

}  // namespace accl
