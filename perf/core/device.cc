#include "core/device.h"

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#if ACCL_PERF_CUDA
#include <cuda_runtime.h>
#endif

namespace perf {
namespace {

constexpr size_t kAlign = 4096;

// Both buffers from ncclMemAlloc (device or host memory, as the library runs).
bool ncclAllocBoth(char** send, char** recv, size_t bytes, std::string* err) {
  ncclResult_t r = ncclMemAlloc(reinterpret_cast<void**>(send), bytes);
  if (r == ncclSuccess) r = ncclMemAlloc(reinterpret_cast<void**>(recv), bytes);
  if (r != ncclSuccess) *err = std::string("ncclMemAlloc failed: ") + ncclGetErrorString(r);
  return r == ncclSuccess;
}

void ncclFreeBoth(char* send, char* recv) {
  (void)ncclMemFree(send);
  (void)ncclMemFree(recv);
}

#if ACCL_PERF_CUDA
bool cudaOk(cudaError_t e, const char* what, std::string* err) {
  if (e == cudaSuccess) return true;
  *err = std::string(what) + " failed: " + cudaGetErrorString(e);
  return false;
}
#else
bool noCuda(std::string* err) {
  *err = "this binary was built without CUDA, but the library put the communicator on a CUDA device; "
         "rebuild the perf drivers with the CUDA toolkit";
  return false;
}
#endif

}  // namespace

#if ACCL_PERF_CUDA
bool cudaBuilt() { return true; }

int deviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

bool setDevice(int device, std::string* err) { return cudaOk(cudaSetDevice(device), "cudaSetDevice", err); }

std::string deviceDescription(int device) {
  if (device < 0) return "[host] host memory";
  cudaDeviceProp prop;
  char busId[32] = "?";
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "[?] unknown device";
  (void)cudaDeviceGetPCIBusId(busId, sizeof busId, device);
  return std::string("[") + busId + "] " + prop.name;
}

RankBuffers::~RankBuffers() {
  if (device_ >= 0) (void)cudaSetDevice(device_);
  if (ncclAlloc_) {
    ncclFreeBoth(send_, recv_);
  } else if (device_ >= 0) {
    if (send_) (void)cudaFree(send_);
    if (recv_) (void)cudaFree(recv_);
  } else {
    std::free(send_);
    std::free(recv_);
  }
  if (ownStream_) (void)cudaStreamDestroy(stream_);
  std::free(stage_);
}

bool RankBuffers::init(int device, size_t bytes, bool streamNull, bool ncclAlloc, std::string* err) {
  device_ = device;
  bytes_ = (bytes + kAlign - 1) / kAlign * kAlign;
  if (device >= 0 && !setDevice(device, err)) return false;
  ncclAlloc_ = ncclAlloc;
  if (ncclAlloc && !ncclAllocBoth(&send_, &recv_, bytes_, err)) return false;
  if (device < 0) {
    if (ncclAlloc) return true;
    if (posix_memalign(reinterpret_cast<void**>(&send_), kAlign, bytes_) ||
        posix_memalign(reinterpret_cast<void**>(&recv_), kAlign, bytes_)) {
      *err = "cannot allocate " + std::to_string(bytes_) + " bytes of host memory";
      return false;
    }
    return true;
  }
  if (!ncclAlloc) {
    if (!cudaOk(cudaMalloc(reinterpret_cast<void**>(&send_), bytes_), "cudaMalloc", err)) return false;
    if (!cudaOk(cudaMalloc(reinterpret_cast<void**>(&recv_), bytes_), "cudaMalloc", err)) return false;
  }
  if (posix_memalign(reinterpret_cast<void**>(&stage_), kAlign, bytes_)) {
    *err = "cannot allocate " + std::to_string(bytes_) + " bytes of host staging memory";
    return false;
  }
  if (!streamNull) {
    if (!cudaOk(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate", err)) return false;
    ownStream_ = true;
  }
  return true;
}

char* RankBuffers::hostView(char* buffer) { return device_ >= 0 ? stage_ : buffer; }

bool RankBuffers::upload(char* buffer, size_t bytes, std::string* err) {
  if (device_ < 0 || bytes == 0) return true;
  // On this rank's stream and waited for there: a device-wide wait (or the
  // legacy stream) would also wait for other threads' ranks, whose kernels may
  // be waiting for this rank's next call (-t N).
  return cudaOk(cudaMemcpyAsync(buffer, stage_, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (to device)",
                err) &&
         cudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", err);
}

bool RankBuffers::download(const char* buffer, size_t bytes, std::string* err) {
  if (device_ < 0 || bytes == 0) return true;
  return cudaOk(cudaMemcpyAsync(stage_, buffer, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (to host)",
                err) &&
         cudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", err);
}

bool RankBuffers::zero(char* buffer, size_t bytes, std::string* err) {
  if (device_ < 0) {
    std::memset(buffer, 0, bytes);
    return true;
  }
  return cudaOk(cudaMemsetAsync(buffer, 0, bytes, stream_), "cudaMemsetAsync", err) &&
         cudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", err);
}

bool syncStreams(RankBuffers* const* ranks, const ncclComm_t* comms, int n, std::string* err) {
  for (;;) {
    bool pending = false;
    for (int i = 0; i < n; i++) {
      if (!ranks[i]->onDevice()) continue;
      cudaError_t e = cudaStreamQuery(ranks[i]->stream());
      if (e == cudaErrorNotReady) {
        pending = true;
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(comms[i], &async) == ncclSuccess && async != ncclSuccess) {
          *err = std::string("asynchronous NCCL error: ") + ncclGetErrorString(async) + " (" +
                 ncclGetLastError(comms[i]) + ")";
          return false;
        }
      } else if (!cudaOk(e, "cudaStreamQuery", err)) {
        return false;
      }
    }
    if (!pending) return true;
    sched_yield();
  }
}

bool beginCapture(cudaStream_t stream, std::string* err) {
  return cudaOk(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture", err);
}

bool endCapture(cudaStream_t stream, void** graph, std::string* err) {
  cudaGraph_t g = nullptr;
  bool ok = cudaOk(cudaStreamEndCapture(stream, &g), "cudaStreamEndCapture", err);
  *graph = g;
  return ok;
}

bool instantiateGraph(void* graph, void** graphExec, std::string* err) {
  cudaGraphExec_t exec = nullptr;
  bool ok = cudaOk(cudaGraphInstantiateWithFlags(&exec, static_cast<cudaGraph_t>(graph), 0), "cudaGraphInstantiate",
                   err);
  (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph));
  *graphExec = exec;
  return ok;
}

bool launchGraph(void* graphExec, cudaStream_t stream, std::string* err) {
  return cudaOk(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graphExec), stream), "cudaGraphLaunch", err);
}

void destroyGraph(void* graphExec) {
  if (graphExec) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graphExec));
}

#else  // host only

bool cudaBuilt() { return false; }
int deviceCount() { return 0; }
bool setDevice(int, std::string* err) { return noCuda(err); }
std::string deviceDescription(int device) { return device < 0 ? "[host] host memory" : "[?] CUDA device"; }

RankBuffers::~RankBuffers() {
  if (ncclAlloc_) {
    ncclFreeBoth(send_, recv_);
  } else {
    std::free(send_);
    std::free(recv_);
  }
}

bool RankBuffers::init(int device, size_t bytes, bool, bool ncclAlloc, std::string* err) {
  if (device >= 0) return noCuda(err);
  bytes_ = (bytes + kAlign - 1) / kAlign * kAlign;
  ncclAlloc_ = ncclAlloc;
  if (ncclAlloc) return ncclAllocBoth(&send_, &recv_, bytes_, err);
  if (posix_memalign(reinterpret_cast<void**>(&send_), kAlign, bytes_) ||
      posix_memalign(reinterpret_cast<void**>(&recv_), kAlign, bytes_)) {
    *err = "cannot allocate " + std::to_string(bytes_) + " bytes of host memory";
    return false;
  }
  return true;
}

char* RankBuffers::hostView(char* buffer) { return buffer; }
bool RankBuffers::upload(char*, size_t, std::string*) { return true; }
bool RankBuffers::download(const char*, size_t, std::string*) { return true; }
bool RankBuffers::zero(char* buffer, size_t bytes, std::string*) {
  std::memset(buffer, 0, bytes);
  return true;
}
bool syncStreams(RankBuffers* const*, const ncclComm_t*, int, std::string*) { return true; }
bool beginCapture(cudaStream_t, std::string* err) { return noCuda(err); }
bool endCapture(cudaStream_t, void**, std::string* err) { return noCuda(err); }
bool instantiateGraph(void*, void**, std::string* err) { return noCuda(err); }
bool launchGraph(void*, cudaStream_t, std::string* err) { return noCuda(err); }
void destroyGraph(void*) {}

#endif

}  // namespace perf
