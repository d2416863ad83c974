#include "base/version.h"

#include "accl.h"

#define ACCL_STR2(x) #x
#define ACCL_STR(x) ACCL_STR2(x)

namespace accl {

const char* versionString() {
  return ACCL_STR(ACCL_VERSION_MAJOR) "." ACCL_STR(ACCL_VERSION_MINOR) "." ACCL_STR(ACCL_VERSION_PATCH);
}

}  // namespace accl
