// Loading an NCCL net plugin (net/plugin.h) and seeing each version of its
// table through the one NetBackend interface.
#include "net/plugin.h"

#include <dlfcn.h>
#include <strings.h>

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "base/debug.h"
#include "base/param.h"
#include "plugin/nccl_net.h"

namespace accl {
namespace {

// The logger a plugin's init receives: its lines go to ACCL's log, with its
// level and subsystem (NCCL's subsystem bits are ours).
void pluginLog(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  const LogLevel l = level == NCCL_LOG_WARN ? LogLevel::Warn : level == NCCL_LOG_TRACE ? LogLevel::Trace
                                                                                        : LogLevel::Info;
  const uint64_t subsys = flags ? flags : kNet;
  if (l != LogLevel::Warn && !logEnabled(l, subsys)) return;
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  logMessage(l, l == LogLevel::Warn ? kAll : subsys, file ? file : "net plugin", line, "%s", text);
}

// One version's table as a NetBackend. V: 8 to 12; the differences are in
// the size types, the profiler handles (v10), the connection's config (v10
// only), the context (v11 on: one per process here, from its init) and the
// virtual devices' width and a device's rail and plane (v12).
template <int V, typename Table, typename Props>
class Plugin final : public NetBackend {
 public:
  explicit Plugin(const Table* t, void* ctx = nullptr) : t_(t), ctx_(ctx) {}
  const char* name() const override { return t_->name; }
  int version() const override { return V; }
  // The physical devices, counted at the first call: a plugin's own count
  // grows with the devices makeVDevice merges (NCCL keeps its physical count too).
  int devices() override {
    std::call_once(counted_, [this] {
      int n = 0;
      physical_ = t_->devices(&n) == ncclSuccess ? n : 0;
    });
    return physical_;
  }
  ncclResult_t properties(int dev, NetDeviceProps* out) override {
    Props p{};
    const ncclResult_t r = t_->getProperties(dev, &p);
    if (r != ncclSuccess) return r;
    *out = NetDeviceProps();
    out->name = p.name ? p.name : "";
    out->pciPath = p.pciPath ? p.pciPath : "";
    out->guid = p.guid;
    out->ptrSupport = p.ptrSupport;
    out->speedMbps = p.speed;
    out->port = p.port;
    out->latencyUs = p.latency;
    out->maxComms = p.maxComms;
    out->maxRecvs = p.maxRecvs;
    if constexpr (V >= 12) {
      out->rail = p.railId;
      out->plane = p.planeId;
    }
    return ncclSuccess;
  }
  ncclResult_t makeVDevice(const int* devs, int n, int* vdev) override {
    if constexpr (V >= 9) {
      using VProps = std::conditional_t<V >= 12, ncclNetVDeviceProps_v12_t, ncclNetVDeviceProps_v9_t>;
      constexpr int kMaxDevs = sizeof(VProps::devs) / sizeof(int);
      if (t_->makeVDevice && n >= 1 && n <= kMaxDevs) {
        VProps props{};
        props.ndevs = n;
        for (int i = 0; i < n; ++i) props.devs[i] = devs[i];
        return t_->makeVDevice(vdev, &props);
      }
    }
    return ncclInvalidUsage;  // v8, or a plugin that merges nothing
  }
  int maxVDeviceNics() const override {
    if constexpr (V >= 9) {
      using VProps = std::conditional_t<V >= 12, ncclNetVDeviceProps_v12_t, ncclNetVDeviceProps_v9_t>;
      if (t_->makeVDevice) return static_cast<int>(sizeof(VProps::devs) / sizeof(int));
    }
    return 1;
  }
  ncclResult_t listen(int dev, const uint8_t*, void* handle, void** listenComm) override {
    if constexpr (V >= 11) return t_->listen(ctx_, dev, handle, listenComm);
    else return t_->listen(dev, handle, listenComm);
  }
  ncclResult_t connect(int dev, const uint8_t*, void* handle, void**, void** sendComm) override {
    ncclNetDeviceHandle_v8_t* offload = nullptr;  // none asked for
    if constexpr (V >= 11) {
      return t_->connect(ctx_, dev, handle, sendComm, &offload);
    } else if constexpr (V == 10) {
      ncclNetCommConfig_v10_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
      return t_->connect(dev, &config, handle, sendComm, &offload);
    } else {
      return t_->connect(dev, handle, sendComm, &offload);
    }
  }
  ncclResult_t accept(void* listenComm, void** recvComm) override {
    ncclNetDeviceHandle_v8_t* offload = nullptr;
    return t_->accept(listenComm, recvComm, &offload);
  }
  ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    return t_->regMr(comm, data, size, type, mhandle);
  }
  ncclResult_t deregMr(void* comm, void* mhandle) override { return t_->deregMr(comm, mhandle); }
  ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) override {
    if constexpr (V == 8) {
      if (size > INT_MAX) return ncclInvalidArgument;
      return t_->isend(sendComm, data, static_cast<int>(size), tag, mhandle, request);
    } else if constexpr (V == 9) {
      return t_->isend(sendComm, data, size, tag, mhandle, request);
    } else {
      return t_->isend(sendComm, data, size, tag, mhandle, nullptr, request);
    }
  }
  ncclResult_t irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) override {
    void* datas[1] = {data};
    int tags[1] = {tag};
    void* mhandles[1] = {mhandle};
    if constexpr (V == 8) {
      if (size > INT_MAX) return ncclInvalidArgument;
      int sizes[1] = {static_cast<int>(size)};
      return t_->irecv(recvComm, 1, datas, sizes, tags, mhandles, request);
    } else if constexpr (V == 9) {
      size_t sizes[1] = {size};
      return t_->irecv(recvComm, 1, datas, sizes, tags, mhandles, request);
    } else {
      size_t sizes[1] = {size};
      void* phandles[1] = {nullptr};
      return t_->irecv(recvComm, 1, datas, sizes, tags, mhandles, phandles, request);
    }
  }
  ncclResult_t test(void* request, int* done, size_t* size) override {
    int n = 0;
    const ncclResult_t r = t_->test(request, done, &n);
    if (size) *size = n > 0 ? static_cast<size_t>(n) : 0;
    return r;
  }
  ncclResult_t closeSend(void* c) override { return t_->closeSend(c); }
  ncclResult_t closeRecv(void* c) override { return t_->closeRecv(c); }
  ncclResult_t closeListen(void* c) override { return t_->closeListen(c); }

 private:
  const Table* t_;
  std::once_flag counted_;
  int physical_ = 0;
  void* ctx_;  // v11 and v12's
};

// A table with a context (v11 and v12), initialized: one context for the
// process (never finalized: connections may outlive static destruction).
template <int V, typename Table, typename Props, typename Config>
NetBackend* takeWithContext(const Table* t, std::string* why) {
  void* ctx = nullptr;
  Config config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  if (t->init(&ctx, 0, &config, pluginLog, nullptr) != ncclSuccess)
    return *why = "its init (v" + std::to_string(V) + ") failed", nullptr;
  return new Plugin<V, Table, Props>(t, ctx);
}

// The table of the newest version `lib` exports that ACCL loads, initialized:
// a NetBackend, or null with *why.
NetBackend* take(void* lib, std::string* why) {
  if (auto* t = static_cast<const ncclNet_v12_t*>(dlsym(lib, "ncclNetPlugin_v12")))
    return takeWithContext<12, ncclNet_v12_t, ncclNetProperties_v12_t, ncclNetCommConfig_v12_t>(t, why);
  if (auto* t = static_cast<const ncclNet_v11_t*>(dlsym(lib, "ncclNetPlugin_v11")))
    return takeWithContext<11, ncclNet_v11_t, ncclNetProperties_v11_t, ncclNetCommConfig_v11_t>(t, why);
  if (auto* t = static_cast<const ncclNet_v10_t*>(dlsym(lib, "ncclNetPlugin_v10"))) {
    if (t->init(pluginLog, nullptr) != ncclSuccess) return *why = "its init (v10) failed", nullptr;
    return new Plugin<10, ncclNet_v10_t, ncclNetProperties_v10_t>(t);
  }
  if (auto* t = static_cast<const ncclNet_v9_t*>(dlsym(lib, "ncclNetPlugin_v9"))) {
    if (t->init(pluginLog) != ncclSuccess) return *why = "its init (v9) failed", nullptr;
    return new Plugin<9, ncclNet_v9_t, ncclNetProperties_v9_t>(t);
  }
  if (auto* t = static_cast<const ncclNet_v8_t*>(dlsym(lib, "ncclNetPlugin_v8"))) {
    if (t->init(pluginLog) != ncclSuccess) return *why = "its init (v8) failed", nullptr;
    return new Plugin<8, ncclNet_v8_t, ncclNetProperties_v8_t>(t);
  }
  std::string older;
  for (int v = 7; v >= 2; --v)
    if (dlsym(lib, ("ncclNetPlugin_v" + std::to_string(v)).c_str())) older += (older.empty() ? "v" : ", v") + std::to_string(v);
  *why = "it exports no table ACCL loads (ncclNetPlugin_v8 to v12)";
  if (!older.empty()) *why += "; it has " + older;
  return nullptr;
}

}  // namespace

NetBackend* loadNetPlugin() {
  const std::string spec = paramString(Param::NetPlugin);
  if (strcasecmp(spec.c_str(), "none") == 0) {
    INFO(kInit | kNet, "NET/Plugin: NCCL_NET_PLUGIN=none: no plugin");
    return nullptr;
  }
  std::vector<std::string> names;
  if (spec.empty()) names = {"libnccl-net.so"};
  else if (spec.find('/') != std::string::npos || spec.find(".so") != std::string::npos) names = {spec};
  else names = {"libnccl-net-" + spec + ".so", "libnccl-net.so"};
  void* lib = nullptr;
  std::string tried;
  for (const std::string& n : names) {
    if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) {
      tried = n;
      break;
    }
    const char* e = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(e ? e : n.c_str());
  }
  if (!lib) {
    if (spec.empty()) INFO(kInit | kNet, "NET/Plugin: no plugin (%s)", tried.c_str());
    else WARN("NCCL_NET_PLUGIN=%s: no plugin could be loaded (%s); using ACCL's own network backend", spec.c_str(),
              tried.c_str());
    return nullptr;
  }
  std::string why;
  NetBackend* b = take(lib, &why);
  if (b && b->devices() <= 0) {
    why = std::string("its network '") + b->name() + "' has no device";
    delete b;
    b = nullptr;
  }
  if (!b) {
    WARN("NET/Plugin: %s: %s; using ACCL's own network backend", tried.c_str(), why.c_str());
    return nullptr;  // not unloaded: its init may have started threads
  }
  INFO(kInit | kNet, "NET/Plugin: Loaded net plugin %s (v%d) from %s, %d device(s)", b->name(), b->version(),
       tried.c_str(), b->devices());
  for (int d = 0; d < b->devices() && d < 64; ++d) {
    NetDeviceProps p;
    if (b->properties(d, &p) != ncclSuccess) continue;
    INFO(kInit | kNet, "NET/Plugin: device %d %s: %d Mbps, rail %d, plane %d (-1: not said), pointers 0x%x", d,
         p.name.c_str(), p.speedMbps, p.rail, p.plane, p.ptrSupport);
  }
  return b;
}

}  // namespace accl
