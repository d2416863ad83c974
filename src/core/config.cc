#include "core/config.h"

#include <cstddef>
#include <cstring>

#include "base/check.h"

namespace accl {
namespace {

// A field exists in the caller's struct when it lies wholly inside `size` bytes.
template <typename T>
bool has(const ncclConfig_t* cfg, size_t offset) {
  return offset + sizeof(T) <= cfg->size;
}

ncclResult_t readInt(const ncclConfig_t* cfg, size_t offset, const char* field, int lo, int hi, int* out) {
  if (!has<int>(cfg, offset)) return ncclSuccess;
  int v;
  memcpy(&v, reinterpret_cast<const char*>(cfg) + offset, sizeof(v));
  if (v == NCCL_CONFIG_UNDEF_INT) return ncclSuccess;
  if (v < lo || v > hi) {
    WARN("ncclConfig_t.%s = %d is out of range [%d, %d]", field, v, lo, hi);
    return ncclInvalidArgument;
  }
  *out = v;
  return ncclSuccess;
}

std::string readStr(const ncclConfig_t* cfg, size_t offset) {
  if (!has<const char*>(cfg, offset)) return "";
  const char* s;
  memcpy(&s, reinterpret_cast<const char*>(cfg) + offset, sizeof(s));
  return s ? std::string(s) : std::string();
}

}  // namespace

ncclResult_t readConfig(const ncclConfig_t* cfg, CommConfig* out) {
  *out = CommConfig();
  if (!cfg) return ncclSuccess;
  // The oldest config (NCCL 2.14) already ends after netName; nothing sane is larger than a page.
  constexpr size_t kMinSize = offsetof(ncclConfig_t, netName) + sizeof(const char*);
  if (cfg->size < kMinSize || cfg->size > 4096) {
    WARN("ncclConfig_t.size = %zu is not a config size (expected %zu..4096: use NCCL_CONFIG_INITIALIZER)",
         cfg->size, kMinSize);
    return ncclInvalidArgument;
  }
  if (cfg->magic != 0xcafebeef) {
    WARN("ncclConfig_t.magic = 0x%x, expected 0xcafebeef: initialise the config with NCCL_CONFIG_INITIALIZER",
         cfg->magic);
    return ncclInvalidArgument;
  }
  if (cfg->version < NCCL_VERSION(2, 14, 0) || cfg->version > NCCL_VERSION(2, 99, 99)) {
    WARN("ncclConfig_t.version = %u is not an NCCL 2.x version code", cfg->version);
    return ncclInvalidArgument;
  }
  int blocking = 1;
  NCCLCHECK(readInt(cfg, offsetof(ncclConfig_t, blocking), "blocking", 0, 1, &blocking));
  out->blocking = blocking != 0;
  NCCLCHECK(readInt(cfg, offsetof(ncclConfig_t, cgaClusterSize), "cgaClusterSize", 0, 8, &out->cgaClusterSize));
  NCCLCHECK(readInt(cfg, offsetof(ncclConfig_t, minCTAs), "minCTAs", 1, 64, &out->minCTAs));
  NCCLCHECK(readInt(cfg, offsetof(ncclConfig_t, maxCTAs), "maxCTAs", 1, 64, &out->maxCTAs));
  if (out->minCTAs > out->maxCTAs) {
    WARN("ncclConfig_t.minCTAs = %d is larger than maxCTAs = %d", out->minCTAs, out->maxCTAs);
    return ncclInvalidArgument;
  }
  out->netName = readStr(cfg, offsetof(ncclConfig_t, netName));
  NCCLCHECK(readInt(cfg, offsetof(ncclConfig_t, splitShare), "splitShare", 0, 1, &out->splitShare));
  NCCLCHECK(readInt(cfg, offsetof(ncclConfig_t, trafficClass), "trafficClass", 0, 255, &out->trafficClass));
  out->commName = readStr(cfg, offsetof(ncclConfig_t, commName));
  NCCLCHECK(readInt(cfg, offsetof(ncclConfig_t, collnetEnable), "collnetEnable", 0, 1, &out->collnetEnable));
  NCCLCHECK(readInt(cfg, offsetof(ncclConfig_t, CTAPolicy), "CTAPolicy", 0, 2, &out->ctaPolicy));
  NCCLCHECK(readInt(cfg, offsetof(ncclConfig_t, shrinkShare), "shrinkShare", 0, 1, &out->shrinkShare));
  return ncclSuccess;
}

}  // namespace accl
