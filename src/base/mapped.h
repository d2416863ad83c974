// Whether host memory is there: a caller's buffer handed to a registration is
// checked against this process's mappings, so that a size past its end is
// refused up front instead of being written later.
#pragma once

#include <cstddef>
#include <string>

namespace accl {

// True where [p, p + n) lies in mappings this process may read and write
// (/proc/self/maps), or where that cannot be told (no /proc). Else false,
// with what is wrong in *why ("bytes from 0x... are not mapped").
bool hostRangeMapped(const void* p, size_t n, std::string* why);

}  // namespace accl
