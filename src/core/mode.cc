#include "core/mode.h"

#include <pthread.h>
#include <sched.h>
#include <dirent.h>
#include <dlfcn.h>
#include <strings.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "base/param.h"

#ifdef ACCL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace accl {

namespace {

ModeInfo* const probed = new ModeInfo();  // made at load; never destroyed (destroys may run at exit)
std::atomic<const ModeInfo*> result{nullptr};
std::atomic<bool> probing{false};

// A child forked while another thread probed CUDA does not probe again: that
// thread, which the child lacks, may hold the CUDA runtime's lock for good.
// (No lock of ours is held across the probe: CUDA may load libraries and
// register fork handlers meanwhile.)
const ModeInfo* const forkedInProbe = new ModeInfo{
    false, 0, "host: this process was forked while another of its threads probed CUDA"};
const int probeAtFork = pthread_atfork(nullptr, nullptr, [] {
  if (probing.load() && !result.load()) result.store(forkedInProbe);
});

bool driverLoads() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!h) return false;
  dlclose(h);
  return true;
}

#ifdef ACCL_HAVE_CUDA
// The runtime reports a missing driver as one too old ("CUDA driver version
// is insufficient"): say which it is.
std::string noDeviceReason(cudaError_t err) {
  if (err == cudaErrorInsufficientDriver && !driverLoads()) return "host: no NVIDIA driver found (no libcuda.so.1)";
  if (err == cudaErrorInsufficientDriver)
    return "host: the NVIDIA driver is older than CUDA " + std::to_string(CUDART_VERSION / 1000) + "." +
           std::to_string(CUDART_VERSION % 1000 / 10) + " (this build) needs";
  if (err == cudaErrorNoDevice) return "host: the NVIDIA driver sees no GPU (CUDA_VISIBLE_DEVICES?)";
  return std::string("host: no usable GPU (") + cudaGetErrorString(err) + ")";
}
#endif

void probe(const char* mode, ModeInfo& info) {
#ifdef ACCL_HAVE_CUDA
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    info.reason = noDeviceReason(err);
    return;
  }
  info.deviceCount = n;
  if (n == 0) {
    info.reason = "host: the CUDA driver reports no devices";
    return;
  }
  if (strcasecmp(mode, "host") == 0) {
    info.reason = "host: ACCL_MODE=host (" + std::to_string(n) + " CUDA device(s) visible)";
    return;
  }
#ifdef ACCL_HAVE_DEVICE_PATH
  info.device = true;
  info.reason = "device: " + std::to_string(n) +
                " CUDA device(s); device buffers run as CUDA kernels, host buffers on the host executor";
#else
  info.reason = "host: " + std::to_string(n) +
                " CUDA device(s) visible, but this build has no device data path (it was built with "
                "ACCL_DEVICE_KERNELS=OFF); host buffers only";
#endif
#else
  (void)mode;
  info.reason = driverLoads() ? "host: built without CUDA, though an NVIDIA driver is here (ACCL_CUDA=ON builds it)"
                              : "host: no NVIDIA driver found (no libcuda.so.1), and built without CUDA";
#endif
}

}  // namespace

const ModeInfo& queryMode() {
  if (const ModeInfo* r = result.load(std::memory_order_acquire)) return *r;
  const char* mode = paramString(Param::Mode);
  bool first = false;
  if (probing.compare_exchange_strong(first, true)) {
    probe(mode, *probed);
    result.store(probed, std::memory_order_release);
  }
  const ModeInfo* r;
  while (!(r = result.load(std::memory_order_acquire))) sched_yield();  // another thread probes
  return *r;
}

int gpuPciIndex(int domain, int bus, int device, const char* gpusDir) {
  DIR* d = opendir(gpusDir);
  if (!d) return -1;
  std::vector<std::string> gpus;  // "0000:18:00.0": fixed-width hex, so text order is PCI order
  while (const dirent* e = readdir(d))
    if (e->d_name[0] != '.') gpus.push_back(e->d_name);
  closedir(d);
  std::sort(gpus.begin(), gpus.end());
  char want[32];
  snprintf(want, sizeof(want), "%04x:%02x:%02x.0", domain, bus, device);
  for (size_t i = 0; i < gpus.size(); ++i)
    if (strcasecmp(gpus[i].c_str(), want) == 0) return static_cast<int>(i);
  return -1;
}

}  // namespace accl
