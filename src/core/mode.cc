#include "core/mode.h"

#include <strings.h>

#include <mutex>

#include "core/param.h"

#ifdef ACCL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace accl {

const ModeInfo& queryMode() {
  static ModeInfo info;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* mode = paramString(Param::Mode);
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
  });
  return info;
}

}  // namespace accl
