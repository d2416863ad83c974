#include "bootstrap/wire.h"

#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "base/check.h"
#include "base/debug.h"
#include "base/sha256.h"
#include "base/wait.h"

namespace accl {

static_assert(kMacBytes == kSha256Bytes && kMacBytes == kSecretBytes, "a MAC is compared as a secret is");
static_assert(offsetof(Hello, mac) + kMacBytes == sizeof(Hello), "the MAC covers every byte before it");

ncclResult_t randomBytes(uint8_t* out, size_t n) {
  for (size_t got = 0; got < n;) {
    const ssize_t r = getrandom(out + got, n - got, 0);
    if (r < 0 && errno != EINTR) {
      WARN("getrandom failed: %s", strerror(errno));
      return ncclSystemError;
    }
    if (r > 0) got += static_cast<size_t>(r);
  }
  return ncclSuccess;
}

namespace {
// The mask of a sealed id's secret, and its MAC, under labels of their own
// (so neither is any other MAC of the same secret).
void idMask(const uint8_t* key, const IdContext& ctx, const uint8_t* salt, uint8_t out[kSecretBytes]) {
  static const char kLabel[] = "ACCL id mask";
  HmacSha256 mac(key, kSecretBytes);
  mac.update(kLabel, sizeof(kLabel));
  mac.update(&ctx, sizeof(ctx));
  mac.update(salt, sizeof(SealedId::salt));
  mac.final(out);
}
void idMac(const uint8_t* key, const IdContext& ctx, const SealedId& s, uint8_t out[kMacBytes]) {
  static const char kLabel[] = "ACCL id mac";
  HmacSha256 mac(key, kSecretBytes);
  mac.update(kLabel, sizeof(kLabel));
  mac.update(&ctx, sizeof(ctx));
  mac.update(&s, offsetof(SealedId, mac));
  mac.final(out);
}
static_assert(offsetof(SealedId, mac) + kMacBytes == sizeof(SealedId), "the MAC covers every byte before it");
static_assert(sizeof(IdContext) == 24, "no padding: every byte of the context is a field's");
}  // namespace

ncclResult_t sealId(const uint8_t* key, const IdContext& ctx, const UniqueIdLayout& id, SealedId* out) {
  memset(out, 0, sizeof(*out));
  memcpy(&out->id, &id, sizeof(id));
  NCCLCHECK(randomBytes(out->salt, sizeof(out->salt)));
  uint8_t mask[kSecretBytes];
  idMask(key, ctx, out->salt, mask);
  for (int i = 0; i < kSecretBytes; ++i) out->id.secret[i] ^= mask[i];
  idMac(key, ctx, *out, out->mac);
  return ncclSuccess;
}

bool openId(const uint8_t* key, const IdContext& ctx, const SealedId& in, UniqueIdLayout* out) {
  uint8_t mac[kMacBytes];
  idMac(key, ctx, in, mac);
  if (!secretEqual(mac, in.mac)) return false;
  memcpy(out, &in.id, sizeof(*out));
  uint8_t mask[kSecretBytes];
  idMask(key, ctx, in.salt, mask);
  for (int i = 0; i < kSecretBytes; ++i) out->secret[i] ^= mask[i];
  return true;
}

ncclResult_t sealHello(Hello& h, const uint8_t* secret) {
  NCCLCHECK(randomBytes(h.nonce, sizeof(h.nonce)));
  hmacSha256(secret, kSecretBytes, &h, offsetof(Hello, mac), h.mac);
  return ncclSuccess;
}

ncclResult_t sendRootHello(int fd, Hello& h, const uint8_t* secret, const Deadline& dl) {
  NCCLCHECK(socketRecv(fd, h.session, kSessionBytes, dl));
  NCCLCHECK(sealHello(h, secret));
  return socketSend(fd, &h, sizeof(h), dl);
}

bool helloValid(const Hello& h, const uint8_t* secret) {
  if (h.magic != kHelloMagic) return false;
  uint8_t mac[kMacBytes];
  hmacSha256(secret, kSecretBytes, &h, offsetof(Hello, mac), mac);
  return secretEqual(mac, h.mac);
}

void bootstrapSession(const SockAddr* table, size_t entries, uint8_t out[kSessionBytes]) {
  Sha256 h;
  h.update(table, entries * sizeof(SockAddr));
  uint8_t full[kSha256Bytes];
  h.final(full);
  memcpy(out, full, kSessionBytes);
}

void rootProof(const uint8_t* secret, const uint8_t* nonce, const RootReply& reply, const SockAddr* table,
               size_t entries, uint8_t out[kMacBytes]) {
  static const char kLabel[] = "ACCL root reply";  // not a hello's MAC, whatever the bytes
  HmacSha256 mac(secret, kSecretBytes);
  mac.update(kLabel, sizeof(kLabel));
  mac.update(nonce, kNonceBytes);
  mac.update(&reply, sizeof(reply));
  mac.update(table, entries * sizeof(SockAddr));
  mac.final(out);
}

}  // namespace accl
