#include "core/mode.h"

#include <strings.h>

#include <atomic>
#include <mutex>

#include "core/fork_safe.h"
#include "core/param.h"

#ifdef ACCL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace accl {

namespace {

// fork() waits for a probe in progress: a child that probed again could wait
// forever on the CUDA runtime's lock, taken by a thread the child lacks.
std::mutex probeMu;
std::mutex& probeLock() { return probeMu; }
const HeldAcrossFork<probeLock> probeFreeAtFork;
ModeInfo* const probed = new ModeInfo();  // made at load; never destroyed (destroys may run at exit)
std::atomic<bool> done{false};

void probe(const char* mode, ModeInfo& info) {
#ifdef ACCL_HAVE_CUDA
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    info.reason = std::string("host: no usable CUDA device (") + cudaGetErrorString(err) + ")";
    return;
  }
  info.deviceCount = n;
  if (n == 0) {
    info.reason = "host: the CUDA driver reports no devices";
    return;
  }
  if (strcasecmp(mode, "host") == 0) {
    info.reason = "host: ACCL_MODE=host (" + std::to_string(n) + " CUDA device(s) visible)";
    return;
  }
#ifdef ACCL_HAVE_DEVICE_PATH
  info.device = true;
  info.reason = "device: " + std::to_string(n) +
                " CUDA device(s); device buffers run as CUDA kernels, host buffers on the host executor";
#else
  info.reason = "host: " + std::to_string(n) +
                " CUDA device(s) visible, but this build has no device data path (it was built with "
                "ACCL_DEVICE_KERNELS=OFF); host buffers only";
#endif
#else
  (void)mode;
  info.reason = "host: built without CUDA (ACCL_CUDA=OFF or nvcc not found)";
#endif
}

}  // namespace

const ModeInfo& queryMode() {
  if (done.load(std::memory_order_acquire)) return *probed;
  const char* mode = paramString(Param::Mode);  // before probeMu, which takes no other lock of ours
  std::lock_guard<std::mutex> lock(probeMu);
  if (!done.load(std::memory_order_relaxed)) {
    probe(mode, *probed);
    done.store(true, std::memory_order_release);
  }
  return *probed;
}

}  // namespace accl
