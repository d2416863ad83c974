// Windows and one-sided operations on host arrays: ncclCommWindowRegister /
// Deregister, ncclPutSignal, ncclSignal, ncclWaitSignal. Registration and
// deregistration are collective and the put and wait may wait for peers, so
// every call runs with the GIL released (other ranks may be threads here).
#include <cstdint>
#include <utility>
#include <vector>

#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"

namespace accl_py {

namespace {

using SendArray = nb::ndarray<nb::ro, nb::device::cpu, nb::c_contig>;
using RecvArray = nb::ndarray<nb::device::cpu, nb::c_contig>;

ncclWindow_t asWindow(uintptr_t handle) { return reinterpret_cast<ncclWindow_t>(handle); }

uintptr_t windowRegister(const Comm& c, RecvArray buf, int flags) {
  ncclComm_t comm = c.get("ncclCommWindowRegister");
  void* data = buf.data();
  const size_t bytes = buf.nbytes();
  ncclWindow_t win = nullptr;
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclCommWindowRegister(comm, data, bytes, &win, flags);
  }
  check(r, "ncclCommWindowRegister");
  return reinterpret_cast<uintptr_t>(win);
}

void windowDeregister(const Comm& c, uintptr_t handle) {
  ncclComm_t comm = c.get("ncclCommWindowDeregister");
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclCommWindowDeregister(comm, asWindow(handle));
  }
  check(r, "ncclCommWindowDeregister");
}

// `count` elements of `datatype` from `send` into `peer`'s window at byte `offset`.
void putSignal(const Comm& c, SendArray send, size_t count, int datatype, int peer, uintptr_t handle,
               size_t offset) {
  ncclComm_t comm = c.get("ncclPutSignal");
  const void* data = send.data();
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclPutSignal(data, count, static_cast<ncclDataType_t>(datatype), peer, asWindow(handle), offset, 0,
                            0, 0, comm, nullptr);
  }
  check(r, "ncclPutSignal");
}

void signal(const Comm& c, int peer) {
  ncclComm_t comm = c.get("ncclSignal");
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclSignal(peer, 0, 0, 0, comm, nullptr);
  }
  check(r, "ncclSignal");
}

// (peer, number of signals) pairs.
void waitSignal(const Comm& c, const std::vector<std::pair<int, int>>& waits) {
  ncclComm_t comm = c.get("ncclWaitSignal");
  std::vector<ncclWaitSignalDesc_t> descs;
  for (const auto& w : waits) descs.push_back(ncclWaitSignalDesc_t{w.second, w.first, 0, 0});
  ncclResult_t r;
  {
    nb::gil_scoped_release nogil;
    r = api().ncclWaitSignal(static_cast<int>(descs.size()), descs.data(), comm, nullptr);
  }
  check(r, "ncclWaitSignal");
}

}  // namespace

void register_rma(nb::module_& m) {
  m.def("window_register", &windowRegister, nb::arg("comm"), nb::arg("buff").noconvert(), nb::arg("flags"),
        "ncclCommWindowRegister (collective); returns the window handle as an integer.");
  m.def("window_deregister", &windowDeregister, nb::arg("comm"), nb::arg("handle"),
        "ncclCommWindowDeregister (collective).");
  m.def("put_signal", &putSignal, nb::arg("comm"), nb::arg("send").noconvert(), nb::arg("count"),
        nb::arg("datatype"), nb::arg("peer"), nb::arg("handle"), nb::arg("offset"),
        "ncclPutSignal into peer's part of a window at a byte offset (sigIdx, ctx, flags 0).");
  m.def("signal", &signal, nb::arg("comm"), nb::arg("peer"), "ncclSignal (sigIdx, ctx, flags 0).");
  m.def("wait_signal", &waitSignal, nb::arg("comm"), nb::arg("waits"),
        "ncclWaitSignal for (peer, count) pairs (sigIdx, ctx 0).");
}

}  // namespace accl_py
