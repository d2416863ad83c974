// Which backend this process uses (net/net.h: netBackend).
#include <strings.h>

#include <mutex>

#include "base/debug.h"
#include "base/param.h"
#include "net/net.h"
#include "net/plugin.h"

namespace accl {

NetBackend* netBackend() {
  static NetBackend* chosen = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    NetBackend* plugin = loadNetPlugin();
    NetBackend* own = socketBackend();
    const char* want = paramString(Param::Net);
    if (!*want) {
      chosen = plugin ? plugin : own;
    } else if (plugin && strcasecmp(want, plugin->name()) == 0) {
      chosen = plugin;
    } else if (strcasecmp(want, own->name()) == 0) {
      chosen = own;
    } else {
      WARN("NCCL_NET=%s names no network backend here (there are: %s%s%s)", want, own->name(), plugin ? ", " : "",
           plugin ? plugin->name() : "");
      return;
    }
    INFO(kInit | kNet, "NET: using %s (%d device(s))", chosen->name(), chosen->devices());
  });
  return chosen;
}

}  // namespace accl
