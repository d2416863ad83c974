// Versions, mode, constants and where the library was loaded from.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <vector>

#include "accl.h"
#include "bindings.h"

namespace accl_py {

namespace {

int getVersion() {
  int v = 0;
  check(api().ncclGetVersion(&v), "ncclGetVersion");
  return v;
}

std::pair<bool, std::string> queryMode() {
  char reason[256] = {0};
  int device = api().acclQueryMode(reason, sizeof(reason));
  return {device == 1, reason};
}

// The libnccl.so.2 this module calls (accl/lib/'s, opened by path at import;
// under LD_PRELOAD of the same file, that one copy).
std::string loadedLibraryPath() { return api().path; }

// The enum values as nccl.h defines them, so tests can hold the Python enums
// to the header.
nb::dict constants() {
  nb::dict d;
#define ACCL_PY_CONST(name) d[#name] = static_cast<int>(name)
  ACCL_PY_CONST(ncclSuccess);
  ACCL_PY_CONST(ncclUnhandledCudaError);
  ACCL_PY_CONST(ncclSystemError);
  ACCL_PY_CONST(ncclInternalError);
  ACCL_PY_CONST(ncclInvalidArgument);
  ACCL_PY_CONST(ncclInvalidUsage);
  ACCL_PY_CONST(ncclRemoteError);
  ACCL_PY_CONST(ncclInProgress);
  ACCL_PY_CONST(ncclTimeout);
  ACCL_PY_CONST(ncclInt8);
  ACCL_PY_CONST(ncclUint8);
  ACCL_PY_CONST(ncclInt32);
  ACCL_PY_CONST(ncclUint32);
  ACCL_PY_CONST(ncclInt64);
  ACCL_PY_CONST(ncclUint64);
  ACCL_PY_CONST(ncclFloat16);
  ACCL_PY_CONST(ncclFloat32);
  ACCL_PY_CONST(ncclFloat64);
  ACCL_PY_CONST(ncclBfloat16);
  ACCL_PY_CONST(ncclFloat8e4m3);
  ACCL_PY_CONST(ncclFloat8e5m2);
  ACCL_PY_CONST(ncclSum);
  ACCL_PY_CONST(ncclProd);
  ACCL_PY_CONST(ncclMax);
  ACCL_PY_CONST(ncclMin);
  ACCL_PY_CONST(ncclAvg);
  ACCL_PY_CONST(NCCL_UNIQUE_ID_BYTES);
#ifdef NCCL_VERSION_CODE
  ACCL_PY_CONST(NCCL_VERSION_CODE);  // the header this module was built against
#endif
#undef ACCL_PY_CONST
  return d;
}

// NCCL's parameter API (ncclParamGetAllParameterKeys, ncclParamGetParameter).
std::vector<std::string> paramKeys() {
  const char** table = nullptr;
  int n = 0;
  check(api().ncclParamGetAllParameterKeys(&table, &n), "ncclParamGetAllParameterKeys");
  return std::vector<std::string>(table, table + n);
}

std::string paramGet(const std::string& key) {
  const char* value = nullptr;
  int len = 0;
  check(api().ncclParamGetParameter(key.c_str(), &value, &len), "ncclParamGetParameter");
  return std::string(value, static_cast<size_t>(len));
}

}  // namespace

void register_info(nb::module_& m) {
  m.def("get_version", &getVersion, "ncclGetVersion(): the NCCL API level code, e.g. 23007.");
  m.def("version_string", []() { return std::string(api().acclGetVersionString()); },
        "acclGetVersionString(): ACCL's own version.");
  m.def("query_mode", &queryMode,
        "acclQueryMode(): (True for device mode, one-line reason such as 'host: ...').");
  m.def("loaded_library_path", &loadedLibraryPath,
        "Path of the libnccl.so.2 this module is bound to at run time.");
  m.def("c_constants", &constants, "Enum values from nccl.h, by their C names.");
  m.attr("UNIQUE_ID_BYTES") = NCCL_UNIQUE_ID_BYTES;
  m.def("param_keys", &paramKeys, "ncclParamGetAllParameterKeys: every parameter's name.");
  m.def("param_get", &paramGet, nb::arg("key"), "ncclParamGetParameter: a parameter's value as text.");
  m.def("param_dump_all", []() { api().ncclParamDumpAll(); },
        "ncclParamDumpAll: every parameter, its value and its source, on stdout.");
}

}  // namespace accl_py
