// Shared declarations of the _accl extension. Each <area>_py.cpp binds one
// area of the NCCL C ABI through a register_<area>() function; _accl.cpp calls
// them all. Nothing here computes: every binding converts arguments, calls the
// C function (GIL released when it may block) and checks the result.
#pragma once

#include <atomic>
#include <exception>
#include <string>

#include <nanobind/nanobind.h>

#include "accl.h"
#include "nccl.h"

namespace accl_py {

namespace nb = nanobind;

// The C functions this module calls, each through api(): resolved at import
// from ACCL's own libnccl.so.2, opened by its path (accl/lib/, beside this
// module) with RTLD_LOCAL. Linking it by SONAME instead would bind to whatever
// libnccl.so.2 the process has already (`import torch` maps NVIDIA's).
#define ACCL_PY_CALLS(X) \
  X(acclGetThreadLastError) \
  X(acclGetVersionString) \
  X(acclQueryMode) \
  X(acclTopoLocal) \
  X(acclTopoPlan) \
  X(acclTunerChoose) \
  X(acclTunerPredict) \
  X(ncclAllGather) \
  X(ncclAllReduce) \
  X(ncclAlltoAll) \
  X(ncclBcast) \
  X(ncclBroadcast) \
  X(ncclCommAbort) \
  X(ncclCommCount) \
  X(ncclCommCuDevice) \
  X(ncclCommDeregister) \
  X(ncclCommDestroy) \
  X(ncclCommFinalize) \
  X(ncclCommGetAsyncError) \
  X(ncclCommGetUniqueId) \
  X(ncclCommGrow) \
  X(ncclCommInitRank) \
  X(ncclCommInitRankConfig) \
  X(ncclCommInitRankScalable) \
  X(ncclCommMemStats) \
  X(ncclCommRegister) \
  X(ncclCommResume) \
  X(ncclCommRevoke) \
  X(ncclCommShrink) \
  X(ncclCommSplit) \
  X(ncclCommSuspend) \
  X(ncclCommUserRank) \
  X(ncclCommWindowDeregister) \
  X(ncclCommWindowRegister) \
  X(ncclGather) \
  X(ncclGetErrorString) \
  X(ncclGetLastError) \
  X(ncclGetUniqueId) \
  X(ncclGetVersion) \
  X(ncclGroupEnd) \
  X(ncclGroupSimulateEnd) \
  X(ncclGroupStart) \
  X(ncclMemAlloc) \
  X(ncclMemFree) \
  X(ncclParamDumpAll) \
  X(ncclParamGetAllParameterKeys) \
  X(ncclParamGetParameter) \
  X(ncclPutSignal) \
  X(ncclRecv) \
  X(ncclRedOpCreatePreMulSum) \
  X(ncclRedOpDestroy) \
  X(ncclReduce) \
  X(ncclReduceScatter) \
  X(ncclScatter) \
  X(ncclSend) \
  X(ncclSignal) \
  X(ncclWaitSignal)

struct Api {
#define ACCL_PY_FIELD(name) decltype(&::name) name = nullptr;
  ACCL_PY_CALLS(ACCL_PY_FIELD)
#undef ACCL_PY_FIELD
  std::string path;  // the file they come from
};
// Opens the library and resolves every call; throws std::runtime_error saying why it cannot.
void load_api();
const Api& api();

// A failed NCCL call. Raised from C++ and turned into an accl.NcclError
// subclass by the translator that errors_py.cpp registers.
class CallError : public std::exception {
 public:
  CallError(ncclResult_t code, std::string call, std::string lastError);
  const char* what() const noexcept override { return what_.c_str(); }

  ncclResult_t code;
  std::string call;       // the C function that failed, e.g. "ncclAllReduce"
  std::string lastError;  // ncclGetLastError(NULL) right after the failure

 private:
  std::string what_;
};

// Returns r when it is ncclSuccess (or ncclInProgress if allowInProgress);
// otherwise throws CallError carrying ncclGetLastError(NULL).
ncclResult_t check(ncclResult_t r, const char* call, bool allowInProgress = false);

// Owns one ncclComm_t. The handle is taken out atomically by destroy/abort, so
// a communicator is released at most once whichever thread gets there first.
class Comm {
 public:
  explicit Comm(ncclComm_t comm) : comm_(comm) {}
  ~Comm();  // destroys a communicator that was never destroyed explicitly
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  // The live handle; throws CallError(ncclInvalidUsage) once released.
  ncclComm_t get(const char* call) const;
  // Takes the handle out (nullptr if already released).
  ncclComm_t release() { return comm_.exchange(nullptr); }
  bool alive() const { return comm_.load() != nullptr; }

 private:
  std::atomic<ncclComm_t> comm_;
};

void register_errors(nb::module_& m);
void register_info(nb::module_& m);
void register_comm(nb::module_& m);
void register_coll(nb::module_& m);
void register_tuner(nb::module_& m);
void register_topo(nb::module_& m);
void register_rma(nb::module_& m);

}  // namespace accl_py
