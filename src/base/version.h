// ACCL's own version ("0.1.0", acclGetVersionString); ncclGetVersion reports
// the NCCL API level instead (nccl.h's NCCL_VERSION_CODE).
#pragma once

namespace accl {

const char* versionString();

}  // namespace accl
