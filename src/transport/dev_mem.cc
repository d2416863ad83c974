// Device connectors' memory as kernels see it (transport/dev_mem.h).
#include "transport/dev_mem.h"

#include "base/check.h"
#include "core/comm.h"

#ifdef ACCL_HAVE_DEVICE_PATH
#include <cuda_runtime.h>

#include <cstring>

namespace accl {

bool devCudaOk(cudaError_t e, const char* what, ncclComm* comm, int peer) {
  if (e == cudaSuccess) return true;
  (void)cudaGetLastError();
  WARN("%s (rank %d, device connector with rank %d): %s failed: %s", comm->name.c_str(), comm->rank, peer, what,
       cudaGetErrorString(e));
  return false;
}

ncclResult_t devHostAlloc(ncclComm* comm, size_t bytes, const char* what, void** host, void** dev) {
  *host = *dev = nullptr;
  void* p = nullptr;
  if (!devCudaOk(cudaSetDevice(comm->cudaDev), "cudaSetDevice", comm, -1) ||
      !devCudaOk(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable), what, comm, -1))
    return ncclUnhandledCudaError;
  memset(p, 0, bytes);
  if (!devCudaOk(cudaHostGetDevicePointer(dev, p, 0), what, comm, -1)) {
    (void)cudaFreeHost(p);
    return ncclUnhandledCudaError;
  }
  *host = p;
  return ncclSuccess;
}

void devHostFree(void* host) {
  if (!host) return;
  (void)cudaFreeHost(host);
  (void)cudaGetLastError();
}

ncclResult_t devTableMake(ncclComm* comm, int peer, const std::vector<DevChan>& chans, void* zero, size_t zeroBytes,
                          DevChan** table) {
  const size_t bytes = sizeof(DevChan) * chans.size();
  void* t = nullptr;
  if (!devCudaOk(cudaMalloc(&t, bytes), "cudaMalloc (channel table)", comm, peer)) return ncclUnhandledCudaError;
  comm->gpuBytes += bytes;
  *table = static_cast<DevChan*>(t);
  cudaStream_t s = nullptr;
  if (!devCudaOk(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate", comm, peer))
    return ncclUnhandledCudaError;
  const bool ok =
      (!zero || devCudaOk(cudaMemsetAsync(zero, 0, zeroBytes, s), "cudaMemsetAsync (FIFO counters)", comm, peer)) &&
      devCudaOk(cudaMemcpyAsync(t, chans.data(), bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync (channel table)",
             comm, peer) &&
      devCudaOk(cudaStreamSynchronize(s), "cudaStreamSynchronize (channel table)", comm, peer);
  (void)cudaStreamDestroy(s);
  return ok ? ncclSuccess : ncclUnhandledCudaError;
}

void devTableFree(DevChan* table) {
  if (!table) return;
  (void)cudaFree(table);
  (void)cudaGetLastError();
}

}  // namespace accl

#else  // no CUDA executor: kernels see nothing

namespace accl {

ncclResult_t devHostAlloc(ncclComm* comm, size_t, const char* what, void** host, void** dev) {
  *host = *dev = nullptr;
  WARN("%s: %s needs a CUDA build of ACCL", comm->name.c_str(), what);
  return ncclInternalError;
}
void devHostFree(void*) {}
ncclResult_t devTableMake(ncclComm* comm, int, const std::vector<DevChan>&, void*, size_t, DevChan** table) {
  *table = nullptr;
  WARN("%s: device connectors need a CUDA build of ACCL", comm->name.c_str());
  return ncclInternalError;
}
void devTableFree(DevChan*) {}

}  // namespace accl
#endif  // ACCL_HAVE_DEVICE_PATH
