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

}  // namespace accl
