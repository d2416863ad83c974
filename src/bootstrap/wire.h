// What travels in a unique id and at the start of every connection.
// Every connection opens with a Hello sealed with a MAC of the unique id's
// secret (HMAC-SHA256), which itself never travels; the accepting side drops
// a connection whose MAC does not verify, or whose nonce it has seen before.
#pragma once

#include <cstdint>
#include <cstring>

#include "base/wait.h"
#include "bootstrap/socket.h"

namespace accl {

constexpr uint32_t kIdMagic = 0x4c434341;     // "ACCL"
constexpr uint32_t kHelloMagic = 0x4f4c4548;  // "HELO"
constexpr int kSecretBytes = 32;
// The most ranks one communicator may have: a count past it is refused at
// the call (and by the root), before anything is sized by it.
constexpr int kMaxRanks = 1 << 20;

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

constexpr int kNonceBytes = 16;
constexpr int kMacBytes = 32;

constexpr int kSessionBytes = 8;
constexpr int32_t kToRoot = -1;

// Every field is covered by the MAC, so a hello taken off the wire is good
// only for the gate it was meant for (`to`, `session`), and only once there
// (the gate keeps the nonces it took).
struct Hello {
  uint32_t magic;
  Purpose purpose;
  int32_t rank;
  int32_t nranks;
  int32_t tag;  // which connection between the same pair (ring, channel, ...)
  int32_t to;   // the rank it is for, or kToRoot
  uint8_t session[kSessionBytes];  // the communicator's (bootstrapSession); to the root, its challenge
  SockAddr addr;                   // the sender's bootstrap listener (Purpose::Root only)
  uint8_t nonce[kNonceBytes];      // random: the same hello twice is a replay
  uint8_t mac[kMacBytes];          // HMAC-SHA256(secret, every byte before it): sealHello
};

// The root's answer to each rank: status, then (on success) every rank's
// listener address, then rootProof over both, which shows the rank that the
// root holds the secret too (a process squatting the root's port does not).
struct RootReply {
  int32_t status;  // ncclResult_t
  char message[252];
};

// Constant-time comparison of secrets and MACs (both 32 bytes).
inline bool secretEqual(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;
  for (int i = 0; i < kSecretBytes; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

// n random bytes from the kernel (getrandom).
ncclResult_t randomBytes(uint8_t* out, size_t n);

// A unique id on its way between the ranks of a communicator (ncclCommSplit,
// ncclCommShrink, ncclCommGrow), which are authenticated when they connect
// but not encrypted: its secret is masked with a key made for this id alone
// from the communicator's secret and a random salt (HMAC-SHA256), and a MAC
// covers the whole, so that only the communicator's ranks read the secret
// and none takes an id altered on the way. The root's address travels as is.
struct SealedId {
  UniqueIdLayout id;  // the secret masked
  uint8_t salt[16];
  uint8_t mac[kMacBytes];
};
// Where a sealed id belongs, which its MAC covers too: an id sealed for
// another child (another color's, an earlier split's or shrink's) is refused.
struct IdContext {
  uint64_t commHash;  // the parent's
  uint32_t op;        // kIdSplit, kIdShrink, kIdGrow
  uint32_t seq;       // the parent's calls of that kind before this one
  int32_t from;       // the sealing rank, in the parent
  int32_t detail;     // a split's color; 0 otherwise
};
constexpr uint32_t kIdSplit = 1, kIdShrink = 2, kIdGrow = 3;
ncclResult_t sealId(const uint8_t* key, const IdContext& ctx, const UniqueIdLayout& id, SealedId* out);
// False where the MAC does not verify (altered, sealed with another secret,
// or for another context).
bool openId(const uint8_t* key, const IdContext& ctx, const SealedId& in, UniqueIdLayout* out);
// Fills h's nonce and MAC, once every other field is set (bootstrap/wire.cc).
ncclResult_t sealHello(Hello& h, const uint8_t* secret);
// The magic is right and the MAC verifies with `secret`.
bool helloValid(const Hello& h, const uint8_t* secret);
// A hello to a root answers the challenge the root sent first on that
// connection (kSessionBytes, random per connection): it carries it as its
// session, so a hello recorded on the wire is good at no other connection,
// also not at a later job's root under NCCL_COMM_ID, whose secret stays the
// same. Reads the challenge, then seals and sends `h` (bootstrap/wire.cc).
ncclResult_t sendRootHello(int fd, Hello& h, const uint8_t* secret, const Deadline& dl);
// A communicator's session: the first bytes of a SHA-256 of the root's table
// of listeners, which every rank has after the rendezvous and which differs
// from one communicator (and one job) to the next.
void bootstrapSession(const SockAddr* table, size_t entries, uint8_t out[kSessionBytes]);
// The MAC the root sends after its reply to the rank whose hello carried
// `nonce` (and after the table, which is empty for a refusal).
void rootProof(const uint8_t* secret, const uint8_t* nonce, const RootReply& reply, const SockAddr* table,
               size_t entries, uint8_t out[kMacBytes]);

}  // namespace accl
