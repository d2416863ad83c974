// Host mode or device mode, and why. Device mode needs a CUDA build, a driver
// and a device; without any of them the library runs in host mode.
#pragma once

#include <string>

namespace accl {

struct ModeInfo {
  bool device = false;
  int deviceCount = 0;
  std::string reason;  // one line for accl.info and the INIT log
};

// Probed once per process (the CUDA runtime probe is not free).
const ModeInfo& queryMode();

// The place of the GPU at this PCI address among the host's NVIDIA GPUs in
// PCI order (the driver's /proc/driver/nvidia/gpus, which lists them all,
// whatever CUDA_VISIBLE_DEVICES hides): NVML's index. -1 when not listed.
// `gpusDir` is for tests.
int gpuPciIndex(int domain, int bus, int device, const char* gpusDir = "/proc/driver/nvidia/gpus");

}  // namespace accl
