// Typed parameter registry (see params.def). Values are read once and cached;
// resetParams() forgets them (tests, ncclResetDebugInit).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace accl {

enum class Param : int {
#define X(id, env, kind, dflt, doc) id,
#include "core/params.def"
#undef X
  Count
};

int64_t paramInt(Param p);
const char* paramString(Param p);  // never NULL; "" when unset and no default
void resetParams();
// "NAME=value (source)" for every parameter, one per line: for accl.info and NCCL_DEBUG=INFO ENV.
std::string dumpParams();

// Parses a nccl.conf file's text: NAME=VALUE lines, '#' comments, blank lines.
// Later lines override earlier ones. Exposed for unit tests.
std::map<std::string, std::string> parseConfText(const std::string& text);
// Parses an integer parameter value (decimal, 0x hex, optional K/M/G suffix). false if malformed.
bool parseIntValue(const char* s, int64_t* out);

}  // namespace accl
