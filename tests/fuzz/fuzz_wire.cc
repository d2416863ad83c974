// What any process that reaches a listener can send before it is trusted: a
// Hello (checked by its MAC), and the sealed ids that a split, shrink or grow
// hands around. Half the inputs are sealed with the known secret first, so
// that the checks past the MAC are reached too.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"

namespace {
const uint8_t kSecret[accl::kSecretBytes] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                             17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool seal = data[0] & 1;
  ++data, --size;
  accl::Hello h;
  memset(&h, 0, sizeof(h));
  memcpy(&h, data, size < sizeof(h) ? size : sizeof(h));
  if (seal) {
    h.magic = accl::kHelloMagic;
    (void)accl::sealHello(h, kSecret);
  }
  (void)accl::helloValid(h, kSecret);

  accl::SealedId s;
  memset(&s, 0, sizeof(s));
  memcpy(&s, data, size < sizeof(s) ? size : sizeof(s));
  accl::IdContext ctx{};
  if (size >= sizeof(ctx)) memcpy(&ctx, data + size - sizeof(ctx), sizeof(ctx));
  if (seal) (void)accl::sealId(kSecret, ctx, s.id, &s);
  accl::UniqueIdLayout out;
  if (accl::openId(kSecret, ctx, s, &out)) (void)accl::uniqueIdValid(out);
  return 0;
}
