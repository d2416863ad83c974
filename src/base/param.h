// Typed parameter registry (see params.def). Values are read once and cached;
// resetParams() forgets them (tests, ncclResetDebugInit).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace accl {

enum class Param : int {
#define X(id, env, kind, dflt, lo, hi, doc) id,
#include "base/params.def"
#undef X
  Count
};

int64_t paramInt(Param p);
const char* paramString(Param p);  // never NULL; "" when unset and no default
bool paramIsSet(Param p);          // given a valid value (environment or file), not left at its default
void resetParams();
// "NAME=value (source)  # meaning" for every parameter, one per line (ncclParamDumpAll).
std::string dumpParams();
// The values that were malformed or out of their range and gave way to the
// default, one line each ("NCCL_BUFFSIZE=99999999999999 is outside [32768,
// 268435456]"): the parameters are read before logging can say so.
std::string paramProblems();

// The table by position, for NCCL's parameter API (api/param_api.cc).
int paramCount();
int paramIndex(const char* env);  // -1: no parameter of that name (names are case-sensitive)
const char* paramName(int i);     // "NCCL_BUFFSIZE": a literal, valid for the process's life
struct ParamValue {
  bool isInt;
  int64_t ival;       // an integer parameter's value
  std::string text;   // its value as text (integers in decimal; a secret's "(hidden)" when set)
};
ParamValue paramValue(int i);

// Parses a nccl.conf file's text: NAME=VALUE lines, '#' comments, blank lines.
// Later lines override earlier ones. Exposed for unit tests.
std::map<std::string, std::string> parseConfText(const std::string& text);
// Parses an integer parameter value (decimal, 0x hex, optional K/M/G suffix). false if malformed.
bool parseIntValue(const char* s, int64_t* out);

}  // namespace accl
