// FNV-1a, 64 bits: a quick hash for identities that need no secrecy (the host,
// a communicator's name for its shared-memory segments).
#pragma once

#include <cstddef>
#include <cstdint>

namespace accl {

inline uint64_t fnv1a(const void* data, size_t len, uint64_t h = 1469598103934665603ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < len; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace accl
