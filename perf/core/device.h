// Where a rank's buffers live. Host mode (the library reports no CUDA device
// for the communicator): host memory and no stream; calls complete before they
// return. Device mode (ncclCommCuDevice >= 0, and the driver was built with
// CUDA): cudaMalloc'd buffers and a stream per rank. All CUDA calls are in
// device.cc behind ACCL_PERF_CUDA; without it device mode is an error.
#pragma once

#include <cstddef>
#include <string>

#include "nccl.h"

namespace perf {

bool cudaBuilt();
// CUDA devices visible to this process (0 without CUDA or a driver).
int deviceCount();
// Makes `device` current for this thread; false with a message in *err.
bool setDevice(int device, std::string* err);
// "[0000:07:00.0] NVIDIA H200" for a device, "[host] host memory" for -1.
std::string deviceDescription(int device);

// One rank's send and receive buffers (each `bytes` long) and its stream.
class RankBuffers {
 public:
  RankBuffers() = default;
  RankBuffers(const RankBuffers&) = delete;
  RankBuffers& operator=(const RankBuffers&) = delete;
  ~RankBuffers();

  // ncclAlloc: the buffers come from ncclMemAlloc (windows need it), else
  // from cudaMalloc (device mode) or the heap (host mode).
  bool init(int device, size_t bytes, bool streamNull, bool ncclAlloc, std::string* err);
  size_t bytes() const { return bytes_; }
  bool onDevice() const { return device_ >= 0; }
  char* send() const { return send_; }
  char* recv() const { return recv_; }
  cudaStream_t stream() const { return stream_; }

  // Host memory of `bytes` to fill or read; in host mode the buffer itself.
  char* hostView(char* buffer);
  // Device mode: copies between the staging area and `buffer`.
  bool upload(char* buffer, size_t bytes, std::string* err);
  bool download(const char* buffer, size_t bytes, std::string* err);
  bool zero(char* buffer, size_t bytes, std::string* err);

 private:
  int device_ = -1;
  size_t bytes_ = 0;
  char* send_ = nullptr;
  char* recv_ = nullptr;
  char* stage_ = nullptr;  // device mode only
  cudaStream_t stream_ = nullptr;
  bool ownStream_ = false;
  bool ncclAlloc_ = false;
};

// Waits for the streams of one thread's ranks (device mode), polling each
// communicator's async error. No-op for host-mode ranks.
bool syncStreams(RankBuffers* const* ranks, const ncclComm_t* comms, int n, std::string* err);

// CUDA graph capture of one thread's streams (device mode only).
bool beginCapture(cudaStream_t stream, std::string* err);
bool endCapture(cudaStream_t stream, void** graph, std::string* err);
// Instantiates (and then destroys) an ended capture. Only once every stream of
// this thread has ended its capture: a capturing stream forbids it.
bool instantiateGraph(void* graph, void** graphExec, std::string* err);
bool launchGraph(void* graphExec, cudaStream_t stream, std::string* err);
void destroyGraph(void* graphExec);

}  // namespace perf
