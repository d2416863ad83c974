#include "base/mapped.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>

namespace accl {

namespace {

// One look at the mappings (see hostRangeMapped).
bool lookOnce(uintptr_t begin, size_t n, std::string* why) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return true;  // cannot be told
  // The mappings come in address order: walk them from `begin` while each
  // one continues the last and may be read and written.
  uintptr_t at = begin;
  const uintptr_t end = begin + n;
  char line[8192];  // a line: addresses, permissions, offset, device, inode, path
  while (at < end && fgets(line, sizeof(line), f)) {
    uintmax_t lo = 0, hi = 0;
    char perms[8] = "";
    if (sscanf(line, "%jx-%jx %7s", &lo, &hi, perms) != 3 || hi <= at) continue;
    if (lo > at) break;  // a hole at `at`
    if (perms[0] != 'r' || perms[1] != 'w') {
      char buf[96];
      snprintf(buf, sizeof(buf), "bytes at %#jx are mapped %s, not for reading and writing", static_cast<uintmax_t>(at),
               perms);
      *why = buf;
      fclose(f);
      return false;
    }
    at = static_cast<uintptr_t>(hi);
  }
  fclose(f);
  if (at >= end) return true;
  char buf[96];
  snprintf(buf, sizeof(buf), "bytes from %#jx on are not mapped (%ju of %zu are)", static_cast<uintmax_t>(at),
           static_cast<uintmax_t>(at - begin), n);
  *why = buf;
  return false;
}

}  // namespace

bool hostRangeMapped(const void* p, size_t n, std::string* why) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
  if (n == 0) return true;
  if (begin + n < begin) {
    *why = "the range wraps around the address space";
    return false;
  }
  // The file is made as it is read: another thread's mmap or munmap meanwhile
  // can hide a mapping from one look, so a refusal is looked at twice.
  return lookOnce(begin, n, why) || lookOnce(begin, n, why);
}

}  // namespace accl
