// The _accl extension module: a thin nanobind layer over libnccl.so.2's C ABI.
// Areas live in python/src/<area>_py.cpp; the Python package (accl/) builds
// the user-facing API on top.
#include "bindings.h"

NB_MODULE(_accl, m) {
  try {
    accl_py::load_api();  // first: every binding calls through it
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_ImportError, e.what());
    throw nanobind::python_error();
  }
  m.doc() = "Low-level bindings to the NCCL C ABI of libnccl.so.2 (use the accl package instead).";
  accl_py::register_errors(m);
  accl_py::register_info(m);
  accl_py::register_comm(m);
  accl_py::register_coll(m);
  accl_py::register_tuner(m);
  accl_py::register_topo(m);
  accl_py::register_rma(m);
}
