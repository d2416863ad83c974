// Collectives, point-to-point, groups and reduction operators on host (CPU)
// arrays. The Python layer picks the datatype and counts and checks shapes;
// here we only check that every buffer the call touches on this rank is large
// enough, then call C with the GIL released.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nanobind/ndarray.h>

#include "bindings.h"

namespace accl_py {

namespace {

using SendArray = nb::ndarray<nb::ro, nb::device::cpu, nb::c_contig>;
using RecvArray = nb::ndarray<nb::device::cpu, nb::c_contig>;

size_t typeSize(int datatype) {
  switch (datatype) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: throw nb::value_error(("unknown ncclDataType_t " + std::to_string(datatype)).c_str());
  }
}

void requireBytes(const char* what, size_t have, size_t need) {
  if (have < need)
    throw nb::value_error((std::string(what) + " holds " + std::to_string(have) + " bytes, " +
                           std::to_string(need) + " needed")
                              .c_str());
}

template <typename A>
size_t bytesOf(const A& a) { return a.is_valid() ? a.nbytes() : 0; }
template <typename A>
auto dataOf(const A& a) -> decltype(a.data()) { return a.is_valid() ? a.data() : nullptr; }

// Which collective coll() runs (the values the Python layer passes).
enum Kind : int {
  kAllReduce = 0, kBroadcast, kReduce, kAllGather, kReduceScatter, kAllToAll, kGather, kScatter,
  kSend, kRecv, kNumKinds
};

const char* const kCallNames[kNumKinds] = {
    "ncclAllReduce", "ncclBroadcast", "ncclReduce",  "ncclAllGather", "ncclReduceScatter",
    "ncclAlltoAll",  "ncclGather",    "ncclScatter", "ncclSend",      "ncclRecv"};

// Calls NCCL's function for `kind` (stream NULL) with the GIL released, even
// for a few bytes (other ranks may be threads of this process, and the
// library waits for them inside the call); raises on its error. Returns 0, or
// 7 when a non-blocking communicator has queued the operation.
int run(int kind, ncclComm_t comm, const void* s, void* r, size_t count, int datatype, int op, int root) {
  const auto dt = static_cast<ncclDataType_t>(datatype);
  const auto red = static_cast<ncclRedOp_t>(op);
  ncclResult_t res = ncclSuccess;
  {
    nb::gil_scoped_release nogil;
    switch (kind) {
      case kAllReduce: res = api().ncclAllReduce(s, r, count, dt, red, comm, nullptr); break;
      case kBroadcast: res = api().ncclBroadcast(s, r, count, dt, root, comm, nullptr); break;
      case kReduce: res = api().ncclReduce(s, r, count, dt, red, root, comm, nullptr); break;
      case kAllGather: res = api().ncclAllGather(s, r, count, dt, comm, nullptr); break;
      case kReduceScatter: res = api().ncclReduceScatter(s, r, count, dt, red, comm, nullptr); break;
      case kAllToAll: res = api().ncclAlltoAll(s, r, count, dt, comm, nullptr); break;
      case kGather: res = api().ncclGather(s, r, count, dt, root, comm, nullptr); break;
      case kScatter: res = api().ncclScatter(s, r, count, dt, root, comm, nullptr); break;
      case kSend: res = api().ncclSend(s, count, dt, root, comm, nullptr); break;
      case kRecv: res = api().ncclRecv(r, count, dt, root, comm, nullptr); break;
    }
  }
  return static_cast<int>(check(res, kCallNames[kind], /*allowInProgress=*/true));
}

// One NCCL collective or p2p call on host buffers (stream NULL). `count` has
// NCCL's meaning for the call (per rank / per peer where NCCL says so); `root`
// is the root, or the peer of send/recv. A buffer NCCL does not touch on this
// rank may be None (NULL). Returns 0, or 7 when a non-blocking communicator
// has queued the operation.
int coll(int kind, const Comm& c, SendArray send, RecvArray recv, size_t count, int datatype,
         int op, int root) {
  if (kind < 0 || kind >= kNumKinds) throw nb::value_error("unknown collective kind");
  const char* call = kCallNames[kind];
  ncclComm_t comm = c.get(call);
  size_t block = count * typeSize(datatype);
  int nranks = 1, rank = 0;
  if (kind != kAllReduce && kind != kSend && kind != kRecv) {
    check(api().ncclCommCount(comm, &nranks), "ncclCommCount");
    check(api().ncclCommUserRank(comm, &rank), "ncclCommUserRank");
  }
  const size_t n = static_cast<size_t>(nranks);
  const bool isRoot = rank == root;
  size_t needSend = 0, needRecv = 0;
  switch (kind) {
    case kAllReduce: needSend = needRecv = block; break;
    case kBroadcast: needSend = isRoot ? block : 0; needRecv = block; break;
    case kReduce: needSend = block; needRecv = isRoot ? block : 0; break;
    case kAllGather: needSend = block; needRecv = n * block; break;
    case kReduceScatter: needSend = n * block; needRecv = block; break;
    case kAllToAll: needSend = needRecv = n * block; break;
    case kGather: needSend = block; needRecv = isRoot ? n * block : 0; break;
    case kScatter: needSend = isRoot ? n * block : 0; needRecv = block; break;
    case kSend: needSend = block; break;
    case kRecv: needRecv = block; break;
  }
  requireBytes("send", bytesOf(send), needSend);
  requireBytes("recv", bytesOf(recv), needRecv);
  return run(kind, comm, dataOf(send), dataOf(recv), count, datatype, op, root);
}

// ncclAllReduce (kept as its own entry point).
int allReduce(const Comm& c, SendArray send, RecvArray recv, size_t count, int datatype, int op) {
  return coll(kAllReduce, c, send, recv, count, datatype, op, 0);
}

// ncclBcast: in place on one buffer.
int bcast(const Comm& c, RecvArray buf, size_t count, int datatype, int root) {
  requireBytes("buff", bytesOf(buf), count * typeSize(datatype));
  ncclComm_t comm = c.get("ncclBcast");
  void* p = dataOf(buf);
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclBcast(p, count, static_cast<ncclDataType_t>(datatype), root, comm, nullptr);
  }
  return static_cast<int>(check(r, "ncclBcast", /*allowInProgress=*/true));
}

// ---- allreduce fast path ---------------------------------------------------
// A small allreduce through Communicator.allreduce used to spend ~2 us in
// Python checks for a ~0.4 us library call (docs/perf.md). This entry does
// the checks of the common case in C++, on the arrays' PEP 3118 buffers: no
// Python-level attribute lookups, no nb::ndarray wrappers. It only accepts
// calls the Python path would accept unchanged, and answers -1 for anything
// else (another type, dtype or op, a non-contiguous or read-only array, a
// size or dtype mismatch, an overlap, a closed communicator) without raising:
// Python then runs its general path, which raises the documented errors. So
// the error messages live in one place, communicator.py.

// numpy.ndarray, looked up at the first call (not at import: the stub
// generator imports this module where NumPy may be absent). A plain pointer
// rather than a function-local static: C++'s init guard would block a second
// thread while it holds the GIL that the import may need. A race at most
// looks the type up twice; the reference is kept for the process's lifetime.
PyObject* g_ndarray = nullptr;

PyObject* ndarrayType() {
  if (g_ndarray == nullptr) {
    nb::object type = nb::module_::import_("numpy").attr("ndarray");
    g_ndarray = type.release().ptr();
  }
  return g_ndarray;
}

// One PEP 3118 view of a NumPy array, released when it goes out of scope.
struct View {
  Py_buffer buf{};
  bool held = false;
  View() = default;
  View(const View&) = delete;
  View& operator=(const View&) = delete;
  ~View() {
    if (held) PyBuffer_Release(&buf);
  }
  // Takes a C-contiguous (and, if asked, writeable) view of `obj`, which must
  // be exactly a numpy.ndarray (asarray() of a subclass is another object,
  // which the Python path returns). False, with no Python error left set,
  // where NumPy refuses: the general path then says why.
  bool take(PyObject* obj, bool writeable) {
    if (reinterpret_cast<PyObject*>(Py_TYPE(obj)) != ndarrayType()) return false;
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writeable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &buf, flags) != 0) {
      PyErr_Clear();  // e.g. "ndarray is not C-contiguous", a read-only array, bfloat16
      return false;
    }
    held = true;
    return true;
  }
};

// ncclDataType_t of a view, or -1. NumPy's native types export a one-letter
// struct format (a byte-order prefix means non-native: left to Python, which
// refuses it). ml_dtypes' types cannot be exported at all (take() fails), so
// bfloat16 and fp8 always take the general path, which views them as integers.
int datatypeOf(const Py_buffer& b) {
  const char* f = b.format;
  if (f == nullptr || f[0] == '\0' || f[1] != '\0') return -1;
  switch (f[0]) {
    case 'b': return ncclInt8;
    case 'B': return ncclUint8;
    case 'i': case 'l': case 'q':
      return b.itemsize == 4 ? ncclInt32 : b.itemsize == 8 ? ncclInt64 : -1;
    case 'I': case 'L': case 'Q':
      return b.itemsize == 4 ? ncclUint32 : b.itemsize == 8 ? ncclUint64 : -1;
    case 'e': return ncclFloat16;
    case 'f': return ncclFloat32;
    case 'd': return ncclFloat64;
    default: return -1;
  }
}

// The built-in op `op` names: "sum", "prod", "max", "min", "avg" (lower case,
// as nearly every caller spells them) or an int / accl.RedOp of 0..4. -1 for
// anything else (other spellings, PreMulSum handles): the general path.
int builtinOp(PyObject* op) {
  if (PyUnicode_Check(op)) {
    static const char* const names[] = {"sum", "prod", "max", "min", "avg"};
    for (int i = 0; i < 5; ++i)
      if (PyUnicode_CompareWithASCIIString(op, names[i]) == 0) return i;
    return -1;
  }
  if (PyLong_Check(op) && !PyBool_Check(op)) {  // True is an int to Python, not an op: the general path refuses it
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(op, &overflow);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return -1;
    }
    return (overflow == 0 && v >= ncclSum && v <= ncclAvg) ? static_cast<int>(v) : -1;
  }
  return -1;
}

// ncclAllReduce(send, recv) when the arguments are the common case: send a
// C-contiguous numpy.ndarray of a native NCCL dtype; recv the same object (in
// place) or a writeable C-contiguous numpy.ndarray of the same dtype and
// element count that is separate or starts at send's address; op as above;
// the communicator open. Returns 0 (done), 7 (queued on a non-blocking
// communicator) or -1 (not the common case: nothing was called). Library
// errors raise as from coll().
int allReduceFast(const Comm& c, nb::handle send, nb::handle recv, nb::handle op) {
  const int red = builtinOp(op.ptr());
  if (red < 0 || !c.alive()) return -1;
  const bool inPlace = send.is(recv);
  View s, r;
  if (!s.take(send.ptr(), inPlace)) return -1;
  const int dt = datatypeOf(s.buf);
  if (dt < 0) return -1;
  const Py_buffer* out = &s.buf;
  if (!inPlace) {
    if (!r.take(recv.ptr(), true)) return -1;
    if (datatypeOf(r.buf) != dt || r.buf.len != s.buf.len) return -1;
    // Overlapping buffers are fine only as NCCL's in-place layout (same start).
    const char* sp = static_cast<const char*>(s.buf.buf);
    const char* rp = static_cast<const char*>(r.buf.buf);
    if (s.buf.len > 0 && sp != rp && sp < rp + r.buf.len && rp < sp + s.buf.len) return -1;
    out = &r.buf;
  }
  ncclComm_t comm = c.get("ncclAllReduce");
  const size_t count = static_cast<size_t>(s.buf.len / s.buf.itemsize);
  return run(kAllReduce, comm, s.buf.buf, out->buf, count, dt, red, 0);
}

// ---- the other calls' fast path ------------------------------------------
// As allReduceFast, for Communicator.broadcast, reduce, allgather,
// reduce_scatter, alltoall, gather, scatter, send and recv: the checks of the
// common case in C++, -1 (nothing called) for anything else. The rules are
// the Python methods' (communicator.py), and stricter where that is simpler:
// given arrays of one native dtype, the element counts the call needs, and
// buffers that are separate or in NCCL's in-place layout. A buffer the call
// does not use on this rank may be None, as the methods allow (gather's recv
// and scatter's and broadcast's send off the root).

bool overlap(const Py_buffer& a, const Py_buffer& b) {
  const char* x = static_cast<const char*>(a.buf);
  const char* y = static_cast<const char*>(b.buf);
  return a.len > 0 && b.len > 0 && x < y + b.len && y < x + a.len;
}

// Separate, or `b` starts `offset` bytes into `a` (NCCL's in-place layouts).
bool separateOr(const Py_buffer& a, const Py_buffer& b, Py_ssize_t offset) {
  return !overlap(a, b) || static_cast<const char*>(b.buf) == static_cast<const char*>(a.buf) + offset;
}

bool rootOf(nb::handle h, int* root) {
  if (!PyLong_Check(h.ptr())) return false;
  int overflow = 0;
  long v = PyLong_AsLongAndOverflow(h.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  if (overflow != 0 || v < INT32_MIN || v > INT32_MAX) return false;
  *root = static_cast<int>(v);  // range: the library's check, with its message
  return true;
}

int collFast(int kind, const Comm& c, nb::handle send, nb::handle recv, nb::handle op, nb::handle root) {
  if (kind <= kAllReduce || kind >= kNumKinds || !c.alive()) return -1;
  const bool reduces = kind == kReduce || kind == kReduceScatter;
  const int red = reduces ? builtinOp(op.ptr()) : 0;
  int peer = 0;
  const bool rooted = kind == kBroadcast || kind == kReduce || kind == kGather || kind == kScatter;
  if (red < 0 || ((rooted || kind == kSend || kind == kRecv) && !rootOf(root, &peer))) return -1;
  const char* call = kCallNames[kind];
  ncclComm_t comm = c.get(call);
  int nranks = 1, rank = 0;
  check(api().ncclCommCount(comm, &nranks), "ncclCommCount");
  check(api().ncclCommUserRank(comm, &rank), "ncclCommUserRank");
  const Py_ssize_t n = nranks;
  const bool isRoot = rank == peer;
  // Which buffers this rank passes (the others go as NULL, as the methods pass None).
  const bool inPlace = !send.is_none() && send.is(recv);
  const bool wantSend = kind != kRecv && !((kind == kScatter || kind == kBroadcast) && !isRoot && send.is_none());
  const bool wantRecv = kind != kSend && !(kind == kGather && !isRoot) && !inPlace;
  View s, r;
  if (wantSend && !s.take(send.ptr(), inPlace)) return -1;
  if (wantRecv && !r.take(recv.ptr(), true)) return -1;
  const int dt = datatypeOf(wantSend ? s.buf : r.buf);
  if (dt < 0 || (wantSend && wantRecv && datatypeOf(r.buf) != dt)) return -1;
  const Py_ssize_t isz = (wantSend ? s.buf : r.buf).itemsize;
  const Py_buffer& in = s.buf;
  const Py_buffer& out = inPlace ? s.buf : r.buf;
  Py_ssize_t count = 0;  // elements, NCCL's count argument
  switch (kind) {
    case kBroadcast:
    case kReduce:
      if (wantSend && wantRecv && (r.buf.len != s.buf.len || !separateOr(in, out, 0))) return -1;
      count = (wantSend ? s.buf.len : r.buf.len) / isz;
      break;
    case kAllGather:
      if (inPlace || r.buf.len != n * s.buf.len || !separateOr(out, in, rank * s.buf.len)) return -1;
      count = s.buf.len / isz;
      break;
    case kReduceScatter:
      if (inPlace || s.buf.len % (n * isz) != 0 || r.buf.len * n != s.buf.len ||
          !separateOr(in, out, rank * r.buf.len))
        return -1;
      count = r.buf.len / isz;
      break;
    case kAllToAll:
      if (s.buf.len % (n * isz) != 0 || (!inPlace && (r.buf.len != s.buf.len || !separateOr(in, out, 0))))
        return -1;
      count = s.buf.len / isz / n;
      break;
    case kGather:
      if (inPlace || (isRoot && (r.buf.len != n * s.buf.len || !separateOr(out, in, peer * s.buf.len)))) return -1;
      count = s.buf.len / isz;
      break;
    case kScatter:
      if (inPlace) return -1;
      if (wantSend && (s.buf.len % (n * isz) != 0 || r.buf.len * n != s.buf.len ||
                       !(isRoot ? separateOr(in, out, peer * r.buf.len) : !overlap(in, out))))
        return -1;
      count = r.buf.len / isz;
      break;
    case kSend: count = s.buf.len / isz; break;
    case kRecv: count = r.buf.len / isz; break;
  }
  const void* sb = wantSend && !(kind == kScatter && !isRoot) ? s.buf.buf : nullptr;
  void* rb = inPlace ? s.buf.buf : wantRecv ? r.buf.buf : nullptr;
  return run(kind, comm, sb, rb, static_cast<size_t>(count), dt, red, peer);
}

// Communicator.sendrecv: ncclSend of `send` to `dest` and ncclRecv into
// `recv` from `source` in one group, for the common case (separate native
// arrays of one dtype, peers in range); -1 (nothing called) otherwise. One
// call and one GIL release instead of a Python group around two methods.
int sendRecvFast(const Comm& c, nb::handle send, nb::handle dest, nb::handle recv, nb::handle source) {
  int to = 0, from = 0;
  if (!c.alive() || !rootOf(dest, &to) || !rootOf(source, &from)) return -1;
  View s, r;
  if (!s.take(send.ptr(), false) || !r.take(recv.ptr(), true)) return -1;
  const int dt = datatypeOf(s.buf);
  if (dt < 0 || datatypeOf(r.buf) != dt || overlap(s.buf, r.buf)) return -1;
  ncclComm_t comm = c.get("ncclSend");
  int nranks = 1;
  check(api().ncclCommCount(comm, &nranks), "ncclCommCount");
  if (to < 0 || to >= nranks || from < 0 || from >= nranks) return -1;
  const auto type = static_cast<ncclDataType_t>(dt);
  const size_t sendCount = static_cast<size_t>(s.buf.len / s.buf.itemsize);
  const size_t recvCount = static_cast<size_t>(r.buf.len / r.buf.itemsize);
  ncclResult_t res;
  const char* call = "ncclGroupStart";
  {
    nb::gil_scoped_release nogil;
    res = api().ncclGroupStart();
    if (res == ncclSuccess) {
      call = "ncclSend";
      res = api().ncclSend(s.buf.buf, sendCount, type, to, comm, nullptr);
      if (res == ncclSuccess) {
        call = "ncclRecv";
        res = api().ncclRecv(r.buf.buf, recvCount, type, from, comm, nullptr);
      }
      if (res == ncclSuccess) {
        call = "ncclGroupEnd";
        res = api().ncclGroupEnd();
      } else {  // close the group without running what it holds
        ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
        (void)api().ncclGroupSimulateEnd(&sim);
      }
    }
  }
  return static_cast<int>(check(res, call, /*allowInProgress=*/true));
}

// ---- groups ----------------------------------------------------------------
void groupStart() { check(api().ncclGroupStart(), "ncclGroupStart"); }

// The outermost end runs the group (and blocks): GIL released. Returns 0, or 7
// when non-blocking communicators still have the group's work in flight.
int groupEnd() {
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclGroupEnd();
  }
  return static_cast<int>(check(r, "ncclGroupEnd", /*allowInProgress=*/true));
}

// ncclGroupSimulateEnd: ends the group without running it; the estimate in
// microseconds (NaN where the library gave none).
float groupSimulateEnd() {
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  check(api().ncclGroupSimulateEnd(&info), "ncclGroupSimulateEnd");
  return info.estimatedTime;
}

// ---- reduction operators ---------------------------------------------------
// `scalar` is a one-element array of `datatype`. Host-immediate: read now.
// Device (ncclScalarDevice): the library keeps the pointer and reads the value
// at every use, so the caller keeps the array alive until ncclRedOpDestroy.
int redOpCreatePreMulSum(const Comm& c, SendArray scalar, int datatype, int residence) {
  requireBytes("scalar", bytesOf(scalar), typeSize(datatype));
  ncclComm_t comm = c.get("ncclRedOpCreatePreMulSum");
  ncclRedOp_t op;
  check(api().ncclRedOpCreatePreMulSum(&op, const_cast<void*>(dataOf(scalar)),
                                 static_cast<ncclDataType_t>(datatype),
                                 static_cast<ncclScalarResidence_t>(residence), comm),
        "ncclRedOpCreatePreMulSum");
  return static_cast<int>(op);
}

void redOpDestroy(const Comm& c, int op) {
  ncclComm_t comm = c.get("ncclRedOpDestroy");
  check(api().ncclRedOpDestroy(static_cast<ncclRedOp_t>(op), comm), "ncclRedOpDestroy");
}

// ---- buffer registration and library memory --------------------------------
uintptr_t commRegister(const Comm& c, RecvArray buf) {
  ncclComm_t comm = c.get("ncclCommRegister");
  void* handle = nullptr;
  check(api().ncclCommRegister(comm, dataOf(buf), bytesOf(buf), &handle), "ncclCommRegister");
  return reinterpret_cast<uintptr_t>(handle);
}

void commDeregister(const Comm& c, uintptr_t handle) {
  ncclComm_t comm = c.get("ncclCommDeregister");
  check(api().ncclCommDeregister(comm, reinterpret_cast<void*>(handle)), "ncclCommDeregister");
}

// ncclMemAlloc as a 1-D uint8 NumPy array that calls ncclMemFree when the
// last reference goes (host mode: host memory).
nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>> memAlloc(size_t nbytes) {
  void* p = nullptr;
  check(api().ncclMemAlloc(&p, nbytes), "ncclMemAlloc");
  nb::capsule owner(p, [](void* q) noexcept { api().ncclMemFree(q); });
  size_t shape[1] = {nbytes};
  return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(p, 1, shape, owner);
}

}  // namespace

void register_coll(nb::module_& m) {
  m.def("coll", &coll, nb::arg("kind"), nb::arg("comm"), nb::arg("send").noconvert().none(),
        nb::arg("recv").noconvert().none(), nb::arg("count"), nb::arg("datatype"), nb::arg("op"),
        nb::arg("root"),
        "One collective/p2p call on C-contiguous host arrays. kind: 0 allreduce, 1 broadcast, "
        "2 reduce, 3 allgather, 4 reducescatter, 5 alltoall, 6 gather, 7 scatter, 8 send, 9 recv; "
        "root is the peer for send/recv; a buffer unused on this rank may be None.");
  m.def("all_reduce", &allReduce, nb::arg("comm"), nb::arg("send").noconvert(),
        nb::arg("recv").noconvert(), nb::arg("count"), nb::arg("datatype"), nb::arg("op"),
        "ncclAllReduce on C-contiguous host arrays; recv may be send (in place).");
  m.def("all_reduce_fast", &allReduceFast, nb::arg("comm"), nb::arg("send").none(),
        nb::arg("recv").none(), nb::arg("op").none(),
        "ncclAllReduce for the common case (see coll_py.cpp); -1 where the arguments are not "
        "that case and nothing was called (Communicator.allreduce then checks them).");
  m.def("coll_fast", &collFast, nb::arg("kind"), nb::arg("comm"), nb::arg("send").none(),
        nb::arg("recv").none(), nb::arg("op").none(), nb::arg("root").none(),
        "The other calls of coll() (kind 1-9) for their common case (see coll_py.cpp); -1 where "
        "the arguments are not that case and nothing was called (the method then checks them).");
  m.def("sendrecv_fast", &sendRecvFast, nb::arg("comm"), nb::arg("send").none(), nb::arg("dest").none(),
        nb::arg("recv").none(), nb::arg("source").none(),
        "ncclSend and ncclRecv in one group for the common case (see coll_py.cpp); -1 where the arguments "
        "are not that case and nothing was called (Communicator.sendrecv then checks them).");
  m.def("bcast", &bcast, nb::arg("comm"), nb::arg("buff").noconvert(), nb::arg("count"),
        nb::arg("datatype"), nb::arg("root"), "ncclBcast (in place).");
  m.def("group_start", &groupStart, "ncclGroupStart.");
  m.def("group_end", &groupEnd, "ncclGroupEnd; returns 0, or 7 (in progress).");
  m.def("group_simulate_end", &groupSimulateEnd,
        "ncclGroupSimulateEnd: ends the group without running it; estimatedTime in microseconds.");
  m.def("redop_create_premul_sum", &redOpCreatePreMulSum, nb::arg("comm"),
        nb::arg("scalar").noconvert(), nb::arg("datatype"), nb::arg("residence"),
        "ncclRedOpCreatePreMulSum; residence 1 host-immediate, 0 device (pointer kept).");
  m.def("redop_destroy", &redOpDestroy, nb::arg("comm"), nb::arg("op"), "ncclRedOpDestroy.");
  m.def("comm_register", &commRegister, nb::arg("comm"), nb::arg("buff").noconvert(),
        "ncclCommRegister; returns the handle as an integer.");
  m.def("comm_deregister", &commDeregister, nb::arg("comm"), nb::arg("handle"),
        "ncclCommDeregister.");
  m.def("mem_alloc", &memAlloc, nb::arg("nbytes"),
        "ncclMemAlloc as a uint8 array; ncclMemFree when it is released.");
}

}  // namespace accl_py
