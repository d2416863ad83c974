#include "core/threads.h"

#include <exception>
#include <system_error>
#include <utility>

#include "core/debug.h"

namespace accl {

ncclResult_t startThread(std::thread* t, std::function<void()> f, const char* what) {
  try {
    *t = std::thread(std::move(f));
    return ncclSuccess;
  } catch (const std::system_error& e) {
    WARN("cannot start %s: %s (the process or its user may be at a thread limit: ulimit -u, the cgroup's pids.max)",
         what, e.what());
    return ncclSystemError;
  } catch (const std::exception& e) {  // bad_alloc, copying the function
    WARN("cannot start %s: %s", what, e.what());
    return ncclSystemError;
  } catch (...) {
    WARN("cannot start %s: unknown exception", what);
    return ncclSystemError;
  }
}

}  // namespace accl
