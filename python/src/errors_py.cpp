// Error reporting: CallError, check(), and the translator that turns a
// CallError into the Python exception built by accl._errors.
#include <Python.h>

#include <nanobind/stl/string.h>

#include "bindings.h"

namespace accl_py {

namespace {

// accl._errors installs a factory(code, call, error_string, last_error) that
// returns the exception to raise. Kept as a raw, deliberately leaked reference:
// a static nb::object would be released after the interpreter is gone.
PyObject* gErrorFactory = nullptr;

void setErrorFactory(nb::object factory) {
  PyObject* old = gErrorFactory;
  gErrorFactory = factory.release().ptr();
  Py_XDECREF(old);
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const CallError& e) {
    if (gErrorFactory == nullptr) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      return;
    }
    try {
      nb::object exc = nb::borrow(gErrorFactory)(static_cast<int>(e.code), e.call,
                                                 api().ncclGetErrorString(e.code), e.lastError);
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    } catch (nb::python_error& pe) {
      pe.restore();  // the factory itself failed: raise that instead
    }
  }
}

}  // namespace

CallError::CallError(ncclResult_t code, std::string call, std::string lastError)
    : code(code), call(std::move(call)), lastError(std::move(lastError)) {
  what_ = this->call + " failed: " + api().ncclGetErrorString(code) + " (code " +
          std::to_string(static_cast<int>(code)) + ")";
  if (!this->lastError.empty()) what_ += ": " + this->lastError;
}

ncclResult_t check(ncclResult_t r, const char* call, bool allowInProgress) {
  if (r == ncclSuccess || (allowInProgress && r == ncclInProgress)) return r;
  // This thread's last WARN: the process's may be another rank's (ranks as threads).
  const char* last = api().acclGetThreadLastError();
  throw CallError(r, call, last ? last : "");
}

void register_errors(nb::module_& m) {
  nb::register_exception_translator(translate);
  m.def("_set_error_factory", &setErrorFactory, nb::arg("factory"),
        "Install factory(code, call, error_string, last_error) -> exception.");
  m.def(
      "get_error_string",
      [](int code) { return api().ncclGetErrorString(static_cast<ncclResult_t>(code)); },
      nb::arg("code"), "ncclGetErrorString(code).");
  m.def(
      "get_last_error",
      []() {
        const char* s = api().ncclGetLastError(nullptr);
        return std::string(s ? s : "");
      },
      "ncclGetLastError(NULL): the last warning the library logged.");
}

}  // namespace accl_py
