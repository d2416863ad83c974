// What each ncclResult_t means, in NCCL's words (ncclGetErrorString).
#pragma once

#include "nccl.h"

namespace accl {

const char* errorString(ncclResult_t result);

}  // namespace accl
