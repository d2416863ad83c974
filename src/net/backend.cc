// Which backend this process uses (net/net.h: netBackend), and the one a
// communicator's ncclConfig_t.netName names (netBackendNamed).
#include <strings.h>

#include <mutex>
#include <string>

#include "base/debug.h"
#include "base/param.h"
#include "net/net.h"
#include "net/plugin.h"

namespace accl {
namespace {

// The backends there are, made once per process: a plugin where one loads,
// and ACCL's own.
struct Backends {
  NetBackend* plugin;
  NetBackend* own;
};
const Backends& backends() {
  static const Backends b{loadNetPlugin(), socketBackend()};
  return b;
}

NetBackend* named(const char* name) {
  const Backends& b = backends();
  if (b.plugin && strcasecmp(name, b.plugin->name()) == 0) return b.plugin;
  if (strcasecmp(name, b.own->name()) == 0) return b.own;
  return nullptr;
}

std::string available() {
  const Backends& b = backends();
  return std::string(b.own->name()) + (b.plugin ? std::string(", ") + b.plugin->name() : "");
}

}  // namespace

NetBackend* netBackend() {
  static NetBackend* chosen = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* want = paramString(Param::Net);
    chosen = !*want ? (backends().plugin ? backends().plugin : backends().own) : named(want);
    if (!chosen) {
      WARN("NCCL_NET=%s names no network backend here (there are: %s)", want, available().c_str());
      return;
    }
    INFO(kInit | kNet, "NET: using %s (%d device(s))", chosen->name(), chosen->devices());
  });
  return chosen;
}

NetBackend* netBackendNamed(const char* name, std::string* there) {
  NetBackend* net = named(name);
  if (!net) *there = available();
  return net;
}

}  // namespace accl
