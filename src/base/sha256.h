// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): the bootstrap authenticates
// its connections with a MAC of the unique id's secret, which never travels.
// Small and dependency-free: libnccl.so.2 links no crypto library, as NCCL's.
#pragma once

#include <cstddef>
#include <cstdint>

namespace accl {

constexpr size_t kSha256Bytes = 32;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t len);
  void final(uint8_t out[kSha256Bytes]);  // the object is spent afterwards

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;    // bytes in buf_
  uint64_t total_ = 0;  // bytes hashed
};

// HMAC-SHA256 of a message given in parts.
class HmacSha256 {
 public:
  HmacSha256(const uint8_t* key, size_t keyLen);
  void update(const void* data, size_t len) { inner_.update(data, len); }
  void final(uint8_t out[kSha256Bytes]);  // the object is spent afterwards

 private:
  uint8_t key_[64] = {};  // the key, hashed first when longer than a block
  Sha256 inner_;
};

void hmacSha256(const uint8_t* key, size_t keyLen, const void* data, size_t len, uint8_t out[kSha256Bytes]);

}  // namespace accl
