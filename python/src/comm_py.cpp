// Communicators: unique ids, init (plain and with ncclConfig_t), split,
// shrink, grow, revoke, suspend/resume, queries, finalize, destroy and abort.
#include <cstring>
#include <string>
#include <type_traits>

#include <vector>

#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"

namespace accl_py {

Comm::~Comm() {
  // A communicator the program never destroyed: release it locally. No GIL
  // juggling here; this can run during interpreter shutdown.
  if (ncclComm_t c = release()) api().ncclCommDestroy(c);
}

ncclComm_t Comm::get(const char* call) const {
  ncclComm_t c = comm_.load();
  if (c == nullptr)
    throw CallError(ncclInvalidUsage, call, "the communicator was already destroyed or aborted");
  return c;
}

namespace {

nb::bytes getUniqueId() {
  ncclUniqueId id;
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclGetUniqueId(&id);
  }
  check(r, "ncclGetUniqueId");
  return nb::bytes(id.internal, sizeof(id.internal));
}

ncclUniqueId toUniqueId(nb::bytes uid) {
  ncclUniqueId id;
  if (uid.size() != sizeof(id.internal))
    throw nb::value_error(("uid must be " + std::to_string(sizeof(id.internal)) + " bytes, got " +
                           std::to_string(uid.size()))
                              .c_str());
  std::memcpy(id.internal, uid.c_str(), sizeof(id.internal));
  return id;
}

// One field's value as T; a TypeError that names the field otherwise (a bare
// cast would raise std::bad_cast, which names nothing).
template <typename T>
T configValue(nb::handle value, const std::string& field, const char* want) {
  T out{};
  if (nb::try_cast(value, out)) return out;
  const std::string type = nb::cast<std::string>(nb::str(value.type().attr("__name__")));
  if (std::is_same<T, int>::value && type == "int")
    throw nb::value_error(("ncclConfig_t field '" + field + "' does not fit in a C int").c_str());
  throw nb::type_error(("ncclConfig_t field '" + field + "' must be " + want + ", not " + type).c_str());
}

// Fills the ncclConfig_t fields named in `config` (a dict); strings land in
// `keep`, which must outlive the init call.
void fillConfig(ncclConfig_t& cfg, nb::dict config, std::string& keep) {
  for (auto [key, value] : config) {
    if (!nb::isinstance<nb::str>(key)) throw nb::type_error("ncclConfig_t field names are strings");
    std::string k = nb::cast<std::string>(key);
    if (k == "net_name") {
      keep = configValue<std::string>(value, k, "a str");
      cfg.netName = keep.c_str();
      continue;
    }
    int* field = k == "blocking"           ? &cfg.blocking
                 : k == "cga_cluster_size" ? &cfg.cgaClusterSize
                 : k == "min_ctas"         ? &cfg.minCTAs
                 : k == "max_ctas"         ? &cfg.maxCTAs
                 : k == "split_share"      ? &cfg.splitShare
                                           : nullptr;
    if (!field) throw nb::value_error(("unknown ncclConfig_t field '" + k + "'").c_str());
    *field = configValue<int>(value, k, "an int");
  }
}

// A config dict, or None (then get() is NULL: the call's default). Not
// copyable: cfg.netName points into netName.
class OptionalConfig {
 public:
  explicit OptionalConfig(nb::handle config) : set_(!config.is_none()) {
    if (set_ && !nb::isinstance<nb::dict>(config)) throw nb::type_error("config must be a dict of ncclConfig_t fields");
    if (set_) fillConfig(cfg_, nb::borrow<nb::dict>(config), netName_);
  }
  OptionalConfig(const OptionalConfig&) = delete;
  OptionalConfig& operator=(const OptionalConfig&) = delete;
  ncclConfig_t* get() { return set_ ? &cfg_ : nullptr; }

 private:
  bool set_;
  ncclConfig_t cfg_ = NCCL_CONFIG_INITIALIZER;
  std::string netName_;
};

// ncclCommInitRank, or ncclCommInitRankConfig when config is a dict. A
// non-blocking communicator may come back still initialising (ncclInProgress):
// poll async_error() until it is no longer in progress.
std::unique_ptr<Comm> initRank(int nranks, nb::bytes uid, int rank, nb::handle config) {
  ncclUniqueId id = toUniqueId(uid);
  ncclComm_t comm = nullptr;
  ncclResult_t r;
  if (config.is_none()) {
    nb::gil_scoped_release nogil;
    r = api().ncclCommInitRank(&comm, nranks, id, rank);
  } else {
    OptionalConfig cfg(config);
    nb::gil_scoped_release nogil;
    r = api().ncclCommInitRankConfig(&comm, nranks, id, rank, cfg.get());
  }
  const char* call = config.is_none() ? "ncclCommInitRank" : "ncclCommInitRankConfig";
  check(r, call, /*allowInProgress=*/true);
  return std::make_unique<Comm>(comm);
}

// ncclCommInitRankScalable: several ids (a list of bytes), optional config.
std::unique_ptr<Comm> initRankScalable(int nranks, int rank, std::vector<nb::bytes> uids,
                                       nb::handle config) {
  std::vector<ncclUniqueId> ids;
  ids.reserve(uids.size());
  for (const nb::bytes& u : uids) ids.push_back(toUniqueId(u));
  ncclComm_t comm = nullptr;
  OptionalConfig cfg(config);
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclCommInitRankScalable(&comm, nranks, rank, static_cast<int>(ids.size()), ids.data(), cfg.get());
  }
  check(r, "ncclCommInitRankScalable", /*allowInProgress=*/true);
  return std::make_unique<Comm>(comm);
}

// ncclCommSplit; None for a rank that joins no new communicator (NOCOLOR).
// Collective over the parent: GIL released. Inside a group the child is
// handed out at once and initialised at the group's end.
std::unique_ptr<Comm> split(const Comm& c, int color, int key, nb::handle config) {
  ncclComm_t parent = c.get("ncclCommSplit");
  ncclComm_t child = nullptr;
  OptionalConfig cfg(config);
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclCommSplit(parent, color, key, &child, cfg.get());
  }
  check(r, "ncclCommSplit", /*allowInProgress=*/true);
  if (child == nullptr) return nullptr;
  return std::make_unique<Comm>(child);
}

// ncclCommShrink: the communicator without the ranks in `exclude` (which do
// not call). flags: NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT.
std::unique_ptr<Comm> shrink(const Comm& c, std::vector<int> exclude, nb::handle config, int flags) {
  ncclComm_t parent = c.get("ncclCommShrink");
  ncclComm_t child = nullptr;
  OptionalConfig cfg(config);
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclCommShrink(parent, exclude.data(), static_cast<int>(exclude.size()), &child, cfg.get(), flags);
  }
  check(r, "ncclCommShrink", /*allowInProgress=*/true);
  return std::make_unique<Comm>(child);
}

// ncclCommGrow. An existing rank passes its communicator (comm) and rank -1;
// a joining rank passes no communicator and its new rank. uid: bytes, or None
// for an existing rank other than 0.
std::unique_ptr<Comm> grow(const Comm* c, int nranks, nb::handle uid, int rank, nb::handle config) {
  ncclComm_t parent = c ? c->get("ncclCommGrow") : nullptr;
  ncclUniqueId id;
  if (!uid.is_none()) id = toUniqueId(nb::cast<nb::bytes>(uid));
  ncclComm_t child = nullptr;
  OptionalConfig cfg(config);
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclCommGrow(parent, nranks, uid.is_none() ? nullptr : &id, rank, &child, cfg.get());
  }
  check(r, "ncclCommGrow", /*allowInProgress=*/true);
  return std::make_unique<Comm>(child);
}

void revoke(const Comm& c) { check(api().ncclCommRevoke(c.get("ncclCommRevoke"), 0), "ncclCommRevoke"); }

void suspend(const Comm& c, int flags) {
  ncclComm_t comm = c.get("ncclCommSuspend");
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;  // finishes the queued work first
    r = api().ncclCommSuspend(comm, flags);
  }
  check(r, "ncclCommSuspend");
}

void resume(const Comm& c) { check(api().ncclCommResume(c.get("ncclCommResume")), "ncclCommResume"); }

uint64_t memStats(const Comm& c, int stat) {
  uint64_t v = 0;
  check(api().ncclCommMemStats(c.get("ncclCommMemStats"), static_cast<ncclCommMemStat_t>(stat), &v),
        "ncclCommMemStats");
  return v;
}

nb::bytes commGetUniqueId(const Comm& c) {
  ncclUniqueId id;
  check(api().ncclCommGetUniqueId(c.get("ncclCommGetUniqueId"), &id), "ncclCommGetUniqueId");
  return nb::bytes(id.internal, sizeof(id.internal));
}

int count(const Comm& c) {
  int n = 0;
  check(api().ncclCommCount(c.get("ncclCommCount"), &n), "ncclCommCount");
  return n;
}

int userRank(const Comm& c) {
  int rank = 0;
  check(api().ncclCommUserRank(c.get("ncclCommUserRank"), &rank), "ncclCommUserRank");
  return rank;
}

int cuDevice(const Comm& c) {
  int dev = -1;
  check(api().ncclCommCuDevice(c.get("ncclCommCuDevice"), &dev), "ncclCommCuDevice");
  return dev;
}

int asyncError(const Comm& c) {
  ncclResult_t state = ncclSuccess;
  check(api().ncclCommGetAsyncError(c.get("ncclCommGetAsyncError"), &state), "ncclCommGetAsyncError");
  return static_cast<int>(state);
}

int finalize(const Comm& c) {
  ncclComm_t comm = c.get("ncclCommFinalize");
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclCommFinalize(comm);
  }
  return static_cast<int>(check(r, "ncclCommFinalize", /*allowInProgress=*/true));
}

// destroy/abort are no-ops on a communicator that is already released.
void destroy(Comm& c) {
  ncclComm_t comm = c.release();
  if (comm == nullptr) return;
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclCommDestroy(comm);
  }
  check(r, "ncclCommDestroy");
}

void abort(Comm& c) {
  ncclComm_t comm = c.release();
  if (comm == nullptr) return;
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclCommAbort(comm);
  }
  check(r, "ncclCommAbort");
}

}  // namespace

void register_comm(nb::module_& m) {
  nb::class_<Comm>(m, "Comm", "An owned ncclComm_t (create with comm_init_rank).")
      .def_prop_ro("alive", &Comm::alive, "False once destroyed or aborted.")
      .def("count", &count, "ncclCommCount.")
      .def("user_rank", &userRank, "ncclCommUserRank.")
      .def("cu_device", &cuDevice, "ncclCommCuDevice (-1 in host mode).")
      .def("async_error", &asyncError, "ncclCommGetAsyncError, as an int code.")
      .def("finalize", &finalize, "ncclCommFinalize; returns 0, or 7 (in progress) if non-blocking.")
      .def("destroy", &destroy, "ncclCommDestroy (no-op if already released).")
      .def("abort", &abort, "ncclCommAbort (no-op if already released).")
      .def("split", &split, nb::arg("color"), nb::arg("key"), nb::arg("config") = nb::none(),
           "ncclCommSplit; None where color is NCCL_SPLIT_NOCOLOR (-1).")
      .def("get_unique_id", &commGetUniqueId, "ncclCommGetUniqueId, as bytes.")
      .def("shrink", &shrink, nb::arg("exclude"), nb::arg("config") = nb::none(), nb::arg("flags") = 0,
           "ncclCommShrink without the ranks in exclude.")
      .def("revoke", &revoke, "ncclCommRevoke.")
      .def("suspend", &suspend, nb::arg("flags") = 0, "ncclCommSuspend.")
      .def("resume", &resume, "ncclCommResume.")
      .def("mem_stats", &memStats, nb::arg("stat"), "ncclCommMemStats of one ncclCommMemStat_t.");

  m.def("get_unique_id", &getUniqueId, "ncclGetUniqueId, as bytes.");
  m.def("comm_init_rank", &initRank, nb::arg("nranks"), nb::arg("uid"), nb::arg("rank"),
        nb::arg("config") = nb::none(),
        "ncclCommInitRank, or ncclCommInitRankConfig when config is a dict of ncclConfig_t "
        "fields (blocking, cga_cluster_size, min_ctas, max_ctas, net_name, split_share).");
  m.def("comm_init_rank_scalable", &initRankScalable, nb::arg("nranks"), nb::arg("rank"),
        nb::arg("uids"), nb::arg("config") = nb::none(),
        "ncclCommInitRankScalable with a list of unique ids (bytes).");
  m.def("comm_grow", &grow, nb::arg("comm").none(), nb::arg("nranks"), nb::arg("uid").none(), nb::arg("rank"),
        nb::arg("config") = nb::none(), "ncclCommGrow (comm None for a joining rank).");
  m.attr("SPLIT_NOCOLOR") = NCCL_SPLIT_NOCOLOR;
  m.attr("SHRINK_ABORT") = NCCL_SHRINK_ABORT;
  m.attr("SUSPEND_MEM") = NCCL_SUSPEND_MEM;
}

}  // namespace accl_py
