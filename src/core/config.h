// ncclConfig_t as it arrives from programs built against any NCCL 2.x header:
// read by its `size` and `version` fields, so fields a caller's header does not
// have keep their defaults.
#pragma once

#include <string>

#include "nccl.h"

namespace accl {

struct CommConfig {
  bool blocking = true;
  int cgaClusterSize = 4, minCTAs = 1, maxCTAs = 32;
  std::string netName, commName;
  int splitShare = 0, trafficClass = 0, collnetEnable = 0, ctaPolicy = 0, shrinkShare = 0;
};

// Validates and copies the fields present in `cfg` (NULL = defaults). Bad magic,
// an implausible size or an out-of-range value is ncclInvalidArgument with a WARN.
ncclResult_t readConfig(const ncclConfig_t* cfg, CommConfig* out);

}  // namespace accl
