// Resolving the module's C calls from ACCL's own libnccl.so.2 (bindings.h).
#include <dlfcn.h>
#include <sys/stat.h>

#include <stdexcept>
#include <string>

#include "bindings.h"

namespace accl_py {

namespace {

Api g_api;

// accl/lib/libnccl.so.2 beside this module; in CMake's build tree (stub
// generation imports the module there) the library's build location.
std::string libraryPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&load_api), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    std::string lib = self.substr(0, self.rfind('/') + 1) + "lib/libnccl.so.2";
    struct stat st;
    if (stat(lib.c_str(), &st) == 0) return lib;
  }
#ifdef ACCL_PY_BUILD_LIB
  return ACCL_PY_BUILD_LIB;
#else
  return "";
#endif
}

}  // namespace

void load_api() {
  const std::string path = libraryPath();
  if (path.empty()) throw std::runtime_error("accl: libnccl.so.2 is not in accl/lib/ beside the _accl module");
  // A path (not a bare name) never matches another library's SONAME, so this
  // is ACCL's copy even when NVIDIA's libnccl.so.2 is loaded already; under
  // LD_PRELOAD of this same file it is the preloaded one.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw std::runtime_error("accl: cannot load " + path + ": " + dlerror());
  Api a;
  a.path = path;
#define ACCL_PY_RESOLVE(name)                                                                             \
  a.name = reinterpret_cast<decltype(a.name)>(dlsym(h, #name));                                           \
  if (!a.name) throw std::runtime_error("accl: " + path + " does not export " #name " (not ACCL's libnccl.so.2?)");
  ACCL_PY_CALLS(ACCL_PY_RESOLVE)
#undef ACCL_PY_RESOLVE
  g_api = a;
}

const Api& api() { return g_api; }

}  // namespace accl_py
