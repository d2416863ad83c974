// What travels in a unique id and at the start of every connection.
// Every connection opens with a Hello carrying the unique id's secret; the
// accepting side drops a connection whose secret does not match.
#pragma once

#include <cstdint>
#include <cstring>

#include "bootstrap/socket.h"

namespace accl {

constexpr uint32_t kIdMagic = 0x4c434341;     // "ACCL"
constexpr uint32_t kHelloMagic = 0x4f4c4548;  // "HELO"
constexpr int kSecretBytes = 32;

// The layout inside ncclUniqueId's 128 bytes.
struct UniqueIdLayout {
  uint32_t magic;
  uint32_t version;
  SockAddr root;  // the root rendezvous listener
  uint8_t secret[kSecretBytes];
  uint32_t fromCommId;  // 1: made from NCCL_COMM_ID, whose root rank 0 starts (no root runs yet)
};
static_assert(sizeof(UniqueIdLayout) <= 128, "must fit in ncclUniqueId");

enum class Purpose : uint32_t { Root = 1, Ring = 2, Data = 3, Shrink = 4 };

struct Hello {
  uint32_t magic;
  Purpose purpose;
  uint8_t secret[kSecretBytes];
  int32_t rank;
  int32_t nranks;
  int32_t tag;    // which connection between the same pair (ring, channel, ...)
  int32_t pad;
  SockAddr addr;  // the sender's bootstrap listener (Purpose::Root only)
};

// The root's answer to each rank: status, then (on success) every rank's listener address.
struct RootReply {
  int32_t status;  // ncclResult_t
  char message[252];
};

// Constant-time comparison of secrets.
inline bool secretEqual(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;
  for (int i = 0; i < kSecretBytes; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

inline bool helloValid(const Hello& h, const uint8_t* secret) {
  return h.magic == kHelloMagic && secretEqual(h.secret, secret);
}

}  // namespace accl
