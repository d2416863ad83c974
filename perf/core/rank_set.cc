#include "core/rank_set.h"

#include <unistd.h>

#include <cstdio>

#include "core/watchdog.h"

namespace perf {

Layout makeLayout(const Collective& c, size_t bytes, ncclDataType_t type, int nranks) {
  Layout l;
  l.elt = typeInfo(type).size;
  l.counts = c.counts(bytes / l.elt, nranks);
  return l;
}

RankSet::RankSet(Shared* s, int thread)
    : s_(s),
      thread_(thread),
      firstRank_((s->world->proc() * s->opts.nThreads + thread) * s->opts.nGpus),
      bufBytes_(std::max<size_t>(s->opts.maxBytes, 64)) {
  int visible = deviceCount();
  for (int i = 0; i < s->opts.nGpus; i++) {
    Rank r;
    r.rank = firstRank_ + i;
    // As nccl-tests: the process's ranks take consecutive devices. Where there
    // are not enough (or none), the library chooses (host mode has no device).
    int dev = s->localDeviceBase + thread * s->opts.nGpus + i;
    r.cudaDev = dev < visible ? dev : -1;
    ranks_.push_back(std::move(r));
  }
}

bool RankSet::anyHostMode() const {
  for (const Rank& r : ranks_) {
    if (r.commDev < 0) return true;
  }
  return false;
}

void RankSet::init() {
  std::string err;
  watchdogDoing(thread_, firstRank_, "ncclCommInitRank");
  bool grouped = ranks_.size() > 1;
  if (grouped) {
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) failCall(*s_, firstRank_, "ncclGroupStart", r, nullptr);
  }
  for (Rank& k : ranks_) {
    if (k.cudaDev >= 0 && !setDevice(k.cudaDev, &err)) fail(k, err);
    ncclResult_t r = ncclCommInitRank(&k.comm, s_->nranks, s_->id, k.rank);
    if (r != ncclSuccess) failCall(*s_, k.rank, "ncclCommInitRank", r, k.comm);
  }
  if (grouped) {
    ncclResult_t r = ncclGroupEnd();
    if (r != ncclSuccess) failCall(*s_, firstRank_, "ncclGroupEnd (ncclCommInitRank)", r, ranks_[0].comm);
  }
  for (Rank& k : ranks_) {
    ncclResult_t r = ncclCommCuDevice(k.comm, &k.commDev);
    if (r != ncclSuccess) failCall(*s_, k.rank, "ncclCommCuDevice", r, k.comm);
    k.buf.reset(new RankBuffers);
    if (!k.buf->init(k.commDev, bufBytes_, s_->opts.streamNull != 0, s_->opts.registerMode == 2, &err))
      fail(k, err);
  }
  registerBuffers();
  if (s_->opts.cudaGraphs > 0 && anyHostMode()) {
    fail(ranks_[0], "-G (cudagraph) needs device buffers, but the library runs this communicator in host mode "
                    "(ncclCommCuDevice = -1); use -G 0");
  }
  watchdogDoing(thread_, firstRank_, "idle");
}

// -R 1: ncclCommRegister (local, per buffer). -R 2: ncclCommWindowRegister
// with NCCL_WIN_COLL_SYMMETRIC, collective on every rank, as nccl-tests (a
// group when this thread drives several ranks: the handles are set at its end).
void RankSet::registerBuffers() {
  const int mode = s_->opts.registerMode;
  if (mode == 0) return;
  watchdogDoing(thread_, firstRank_, mode == 1 ? "ncclCommRegister" : "ncclCommWindowRegister");
  const bool grouped = mode == 2 && ranks_.size() > 1;
  if (grouped) groupCall(ncclGroupStart(), "ncclGroupStart");
  for (Rank& k : ranks_) {
    char* bufs[2] = {k.buf->send(), k.buf->recv()};
    for (int i = 0; i < 2; i++) {
      ncclResult_t r = mode == 1
          ? ncclCommRegister(k.comm, bufs[i], k.buf->bytes(), &k.handles[i])
          : ncclCommWindowRegister(k.comm, bufs[i], k.buf->bytes(), reinterpret_cast<ncclWindow_t*>(&k.handles[i]),
                                   NCCL_WIN_COLL_SYMMETRIC);
      if (r != ncclSuccess) failCall(*s_, k.rank, mode == 1 ? "ncclCommRegister" : "ncclCommWindowRegister", r, k.comm);
    }
  }
  if (grouped) groupCall(ncclGroupEnd(), "ncclGroupEnd (ncclCommWindowRegister)");
  watchdogDoing(thread_, firstRank_, "idle");
}

void RankSet::groupCall(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) failCall(*s_, firstRank_, call, r, ranks_[0].comm);
}

void RankSet::deregisterBuffers() {
  const int mode = s_->opts.registerMode;
  if (mode == 0) return;
  const bool grouped = mode == 2 && ranks_.size() > 1;
  if (grouped) groupCall(ncclGroupStart(), "ncclGroupStart");
  for (Rank& k : ranks_) {
    for (void*& h : k.handles) {
      if (!h) continue;
      ncclResult_t r = mode == 1 ? ncclCommDeregister(k.comm, h)
                                 : ncclCommWindowDeregister(k.comm, reinterpret_cast<ncclWindow_t>(h));
      if (r != ncclSuccess)
        failCall(*s_, k.rank, mode == 1 ? "ncclCommDeregister" : "ncclCommWindowDeregister", r, k.comm);
      h = nullptr;
    }
  }
  if (grouped) groupCall(ncclGroupEnd(), "ncclGroupEnd (ncclCommWindowDeregister)");
}

void RankSet::destroy() {
  watchdogDoing(thread_, firstRank_, "ncclCommDestroy");
  deregisterBuffers();
  for (Rank& k : ranks_) {
    k.buf.reset();
    ncclResult_t r = ncclCommDestroy(k.comm);
    if (r != ncclSuccess) failCall(*s_, k.rank, "ncclCommDestroy", r, k.comm);
    k.comm = nullptr;
  }
}

std::string RankSet::describe() const {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string out;
  for (const Rank& k : ranks_) {
    char line[512];
    std::snprintf(line, sizeof line, "#  Rank %2d Group %2d Pid %6d on %10s device %2d %s\n", k.rank, 0,
                  int(getpid()), host, k.commDev, deviceDescription(k.commDev).c_str());
    out += line;
  }
  return out;
}

char* RankSet::sendPtr(const Rank& r, const Layout& l, bool inPlace, size_t shift) const {
  if (inPlace) return r.buf->recv() + shift + l.counts.sendInPlace * l.elt * size_t(r.rank);
  return r.buf->send() + shift;
}

char* RankSet::recvPtr(const Rank& r, const Layout& l, bool inPlace, size_t shift) const {
  return r.buf->recv() + shift + (inPlace ? l.counts.recvInPlace * l.elt * size_t(r.rank) : 0);
}

bool RankSet::start(const TestParams& t, const Layout& l, bool inPlace, int iter, bool probe, std::string* why) {
  // As nccl-tests: successive iterations use successive slices of the buffers.
  size_t total = l.totalBytes();
  size_t steps = total ? std::max<size_t>(bufBytes_ / total, 1) : 1;
  size_t shift = total * (size_t(iter) % steps);
  const Collective& c = *s_->coll;
  bool grouped = ranks_.size() > 1;
  if (grouped) {
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) failCall(*s_, firstRank_, "ncclGroupStart", r, nullptr);
  }
  ncclResult_t bad = ncclSuccess;
  const char* badCall = c.call;
  const Rank* badRank = nullptr;
  bool endedGroup = false;  // bad came from ncclGroupEnd
  Pattern scalars(t.type, t.op, s_->nranks, 0);
  for (const Rank& k : ranks_) {
    watchdogDoing(thread_, k.rank, c.call);
    ncclRedOp_t op = builtinOp(t.op);
    if (c.takesOp && t.op == Op::MulSum) {
      uint64_t scalar = 0;
      storeValue(t.type, &scalar, 0, scalars.scalar(k.rank));
      bad = ncclRedOpCreatePreMulSum(&op, &scalar, t.type, ncclScalarHostImmediate, k.comm);
      if (bad != ncclSuccess) {
        badCall = "ncclRedOpCreatePreMulSum";
        badRank = &k;
        break;
      }
    }
    CallArgs a{sendPtr(k, l, inPlace, shift), recvPtr(k, l, inPlace, shift), l.counts.param, t.type, op,
               c.hasRoot ? t.root : -1, k.comm, k.buf->stream()};
    bad = c.run(a);
    if (c.takesOp && t.op == Op::MulSum) {
      ncclResult_t r = ncclRedOpDestroy(op, k.comm);
      if (bad == ncclSuccess && r != ncclSuccess) bad = r, badCall = "ncclRedOpDestroy";
    }
    if (bad != ncclSuccess) {
      badRank = &k;
      break;
    }
  }
  if (grouped) {
    ncclResult_t r = ncclGroupEnd();
    if (bad == ncclSuccess && r != ncclSuccess) {
      bad = r;
      badCall = "ncclGroupEnd";
      badRank = &ranks_[0];
      endedGroup = true;
    }
  }
  if (bad != ncclSuccess) {
    // ACCL refuses what it does not support with ncclInvalidUsage; NVIDIA NCCL
    // refuses a datatype/operator pair it lacks with ncclInvalidArgument, from
    // the call itself (a group's end failing with it is an error).
    bool refused = bad == ncclInvalidUsage || (bad == ncclInvalidArgument && !endedGroup);
    if (probe && refused) {
      *why = lastError(badRank->comm);
      if (why->empty()) *why = std::string(badCall) + ": " + ncclGetErrorString(bad);
      watchdogDoing(thread_, firstRank_, "idle");
      return false;
    }
    failCall(*s_, badRank->rank, badCall, bad, badRank->comm);
  }
  if (s_->opts.blocking) {
    complete();
    s_->team->barrier();
  }
  return true;
}

void RankSet::complete() {
  std::vector<RankBuffers*> bufs;
  std::vector<ncclComm_t> comms;
  for (const Rank& k : ranks_) {
    bufs.push_back(k.buf.get());
    comms.push_back(k.comm);
  }
  std::string err;
  if (!syncStreams(bufs.data(), comms.data(), int(bufs.size()), &err)) fail(ranks_[0], err);
  watchdogDoing(thread_, firstRank_, "idle");
}

void RankSet::fill(const TestParams& t, const Layout& l, bool inPlace, uint32_t seed) {
  const Collective& c = *s_->coll;
  Pattern p(t.type, c.takesOp ? t.op : Op::None, s_->nranks, seed);
  std::string err;
  for (const Rank& k : ranks_) {
    if (!k.buf->zero(k.buf->recv(), l.recvBytes(), &err)) fail(k, err);
    char* target = sendPtr(k, l, inPlace, 0);
    char* host = k.buf->hostView(target);
    for (size_t i = 0; i < l.counts.send; i++) {
      storeValue(t.type, host, i, c.input(p, k.rank, s_->nranks, t.root, i));
    }
    if (!k.buf->upload(target, l.sendBytes(), &err)) fail(k, err);
  }
}

long long RankSet::check(const TestParams& t, const Layout& l, bool inPlace, uint32_t seed) {
  const Collective& c = *s_->coll;
  Pattern p(t.type, c.takesOp ? t.op : Op::None, s_->nranks, seed);
  std::string err;
  long long wrong = 0;
  watchdogDoing(thread_, firstRank_, "checking results");
  for (const Rank& k : ranks_) {
    char* data = recvPtr(k, l, inPlace, 0);
    if (!k.buf->download(data, l.recvBytes(), &err)) fail(k, err);
    const char* host = k.buf->hostView(data);
    for (size_t i = 0; i < l.counts.recv; i++) {
      double want = 0;
      if (!c.expected(p, k.rank, s_->nranks, t.root, l.counts.param, i, &want)) continue;
      if (!p.matches(loadValue(t.type, host, i), want)) wrong++;
    }
  }
  watchdogDoing(thread_, firstRank_, "idle");
  return wrong;
}

void RankSet::beginCapture() {
  std::string err;
  for (const Rank& k : ranks_) {
    if (!perf::beginCapture(k.buf->stream(), &err)) fail(k, err);
  }
}

void RankSet::endCapture(std::vector<void*>* graphs) {
  std::string err;
  std::vector<void*> captured;
  for (const Rank& k : ranks_) {
    void* g = nullptr;
    if (!perf::endCapture(k.buf->stream(), &g, &err)) fail(k, err);
    captured.push_back(g);
  }
  for (size_t i = 0; i < ranks_.size(); i++) {
    void* exec = nullptr;
    if (!instantiateGraph(captured[i], &exec, &err)) fail(ranks_[i], err);
    graphs->push_back(exec);
  }
}

void RankSet::launch(const std::vector<void*>& graphs) {
  std::string err;
  for (size_t i = 0; i < ranks_.size(); i++) {
    if (!launchGraph(graphs[i], ranks_[i].buf->stream(), &err)) fail(ranks_[i], err);
  }
}

}  // namespace perf
