#include "core/config.h"

#include <algorithm>
#include <atomic>
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

// A field ACCL reads, validates and does not use (yet): where the caller
// set it, one WARN per field and process says so. *out keeps it (a split's
// NULL config inherits its parent's).
ncclResult_t readUnused(const ncclConfig_t* cfg, size_t offset, const char* field, int lo, int hi, int bit,
                        int* out) {
  static std::atomic<uint32_t> said{0};
  int v = NCCL_CONFIG_UNDEF_INT;
  NCCLCHECK(readInt(cfg, offset, field, lo, hi, &v));
  if (v == NCCL_CONFIG_UNDEF_INT) return ncclSuccess;
  if (!(said.fetch_or(1u << bit) & (1u << bit)))
    WARN("ncclConfig_t.%s = %d is valid, but ACCL does not use it (docs/api-status.md)", field, v);
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
  // What NCCL refuses is refused; what it clamps (a cluster past 8, more
  // CTAs than channels) is clamped.
  constexpr int kNoLimit = 0x7fffffff;
  NCCLCHECK(readUnused(cfg, offsetof(ncclConfig_t, cgaClusterSize), "cgaClusterSize", 0, kNoLimit, 7,
                       &out->cgaClusterSize));
  NCCLCHECK(readUnused(cfg, offsetof(ncclConfig_t, minCTAs), "minCTAs", 1, kNoLimit, 8, &out->minCTAs));
  NCCLCHECK(readUnused(cfg, offsetof(ncclConfig_t, maxCTAs), "maxCTAs", 1, kNoLimit, 9, &out->maxCTAs));
  if (out->minCTAs > out->maxCTAs) {
    WARN("ncclConfig_t.minCTAs = %d is larger than maxCTAs = %d", out->minCTAs, out->maxCTAs);
    return ncclInvalidArgument;
  }
  out->cgaClusterSize = std::min(out->cgaClusterSize, 8);
  out->minCTAs = std::min(out->minCTAs, 64);
  out->maxCTAs = std::min(out->maxCTAs, 64);
  out->netName = readStr(cfg, offsetof(ncclConfig_t, netName));
  NCCLCHECK(readInt(cfg, offsetof(ncclConfig_t, splitShare), "splitShare", 0, 1, &out->splitShare));
  NCCLCHECK(readUnused(cfg, offsetof(ncclConfig_t, trafficClass), "trafficClass", -kNoLimit, kNoLimit, 10,
                       &out->trafficClass));  // NCCL checks none
  out->commName = readStr(cfg, offsetof(ncclConfig_t, commName));
  NCCLCHECK(readUnused(cfg, offsetof(ncclConfig_t, collnetEnable), "collnetEnable", 0, 1, 11, &out->collnetEnable));
  // A bitmask of NCCL_CTA_POLICY_EFFICIENCY and NCCL_CTA_POLICY_ZERO, as NCCL takes it.
  NCCLCHECK(readUnused(cfg, offsetof(ncclConfig_t, CTAPolicy), "CTAPolicy", 0,
                       NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO, 12, &out->ctaPolicy));
  NCCLCHECK(readInt(cfg, offsetof(ncclConfig_t, shrinkShare), "shrinkShare", 0, 1, &out->shrinkShare));
  // NCCL 2.27 and 2.30's fields, validated as NCCL validates them; ACCL has
  // no NVLS, no per-peer network channels, no graph mixing modes and one
  // one-sided context, so it reads them and says it leaves them (docs/api-status.md).
  int unused = 0;
  NCCLCHECK(readUnused(cfg, offsetof(ncclConfig_t, nvlsCTAs), "nvlsCTAs", 1, kNoLimit, 0, &unused));
  NCCLCHECK(readUnused(cfg, offsetof(ncclConfig_t, nChannelsPerNetPeer), "nChannelsPerNetPeer", 1, 64, 1, &unused));
  NCCLCHECK(readUnused(cfg, offsetof(ncclConfig_t, nvlinkCentricSched), "nvlinkCentricSched", 0, 1, 2, &unused));
  NCCLCHECK(readUnused(cfg, offsetof(ncclConfig_t, graphUsageMode), "graphUsageMode", 0, 2, 3, &unused));
  NCCLCHECK(readUnused(cfg, offsetof(ncclConfig_t, numRmaCtx), "numRmaCtx", 0, kNoLimit, 4, &unused));
  NCCLCHECK(readUnused(cfg, offsetof(ncclConfig_t, maxP2pPeers), "maxP2pPeers", 1, kNoLimit, 5, &unused));
  NCCLCHECK(readUnused(cfg, offsetof(ncclConfig_t, graphStreamOrdering), "graphStreamOrdering", 0, 1, 6, &unused));
  return ncclSuccess;
}

}  // namespace accl
