// Shared CUDA IPC mappings (coll/dev_ipc.h).
#ifdef ACCL_HAVE_DEVICE_PATH
#include "coll/dev_ipc.h"

#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "base/debug.h"
#include "coll/dev_state.h"

namespace accl {
namespace {

struct Mapping {
  void* base;
  int users;
};
std::mutex mapsMu;
std::map<std::string, Mapping>& maps() {
  static auto* m = new std::map<std::string, Mapping>();  // never destroyed: mappings may outlive static destructors
  return *m;
}

}  // namespace

ncclResult_t ipcOpen(ncclComm* comm, const char* handle, int peer, const char* what, void** out) {
  std::lock_guard<std::mutex> lock(mapsMu);
  std::string key(handle, sizeof(cudaIpcMemHandle_t));
  key += std::to_string(comm->cudaDev);  // mapped into this device's context
  auto it = maps().find(key);
  if (it != maps().end()) {
    ++it->second.users;
    *out = it->second.base;
    return ncclSuccess;
  }
  cudaIpcMemHandle_t h;
  memcpy(&h, handle, sizeof h);
  void* p = nullptr;
  cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    WARN("%s (%s, rank %d): cannot map rank %d's device memory through CUDA IPC: %s", what, comm->name.c_str(),
         comm->rank, peer, cudaGetErrorString(e));
    return ncclUnhandledCudaError;
  }
  maps()[key] = Mapping{p, 1};
  *out = p;
  return ncclSuccess;
}

void ipcClose(void* base) {
  std::lock_guard<std::mutex> lock(mapsMu);
  for (auto it = maps().begin(); it != maps().end(); ++it) {
    if (it->second.base != base) continue;
    if (--it->second.users == 0) {
      (void)cudaIpcCloseMemHandle(base);
      (void)cudaGetLastError();
      maps().erase(it);
    }
    return;
  }
}

bool allocationRange(const void* p, char** base, size_t* bytes) {
  using GetRange = int (*)(unsigned long long*, size_t*, unsigned long long);
  static const GetRange fn = reinterpret_cast<GetRange>(driverFunction("cuMemGetAddressRange"));
  unsigned long long b = 0;
  size_t size = 0;
  if (!fn || fn(&b, &size, reinterpret_cast<unsigned long long>(p)) != 0) return false;
  *base = reinterpret_cast<char*>(b);
  *bytes = size;
  return true;
}

}  // namespace accl
#endif
