// ncclConfig_t as a program built against any NCCL header may pass it: read
// by its own size and version fields. The input is the struct's bytes (the
// caller's struct is as large as its `size` says, so the bytes are padded
// to the most a config may claim).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  alignas(ncclConfig_t) static uint8_t buf[4096];
  memset(buf, 0, sizeof(buf));
  memcpy(buf, data, size < sizeof(buf) ? size : sizeof(buf));
  auto* cfg = reinterpret_cast<ncclConfig_t*>(buf);
  // Strings are pointers in the caller's memory: point them at text we own.
  static const char kName[] = "fuzzed";
  if (cfg->size >= offsetof(ncclConfig_t, netName) + sizeof(const char*)) cfg->netName = size & 1 ? kName : nullptr;
  if (cfg->size >= offsetof(ncclConfig_t, commName) + sizeof(const char*)) cfg->commName = size & 2 ? kName : nullptr;
  accl::CommConfig out;
  (void)accl::readConfig(size & 4 ? cfg : nullptr, &out);
  (void)accl::readConfig(cfg, &out);
  return 0;
}
