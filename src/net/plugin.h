// External network plugins: shared objects built for NCCL that export a
// table of the net interface (include/plugin/nccl_net.h), loaded as NCCL
// loads them and seen through a NetBackend.
#pragma once

#include "net/net.h"

namespace accl {

// NCCL_NET_PLUGIN: unset, libnccl-net.so if there is one; "none", no plugin;
// a name, libnccl-net-<name>.so then libnccl-net.so; a path, that file. The
// newest table it exports that ACCL knows (v11 to v8) is taken, initialized,
// and must have a device. Null where there is none to use: a WARN says why
// (an INFO where NCCL_NET_PLUGIN is unset and no libnccl-net.so is there).
NetBackend* loadNetPlugin();

}  // namespace accl
