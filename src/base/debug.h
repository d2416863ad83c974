// Logging in NCCL's line format: "host:pid:tid [dev] NCCL INFO ...".
// One logger for the whole library; levels and subsystems follow NCCL_DEBUG and
// NCCL_DEBUG_SUBSYS, output goes to stderr or NCCL_DEBUG_FILE (%h host, %p pid).
// Every WARN is also kept as the "last error" that ncclGetLastError returns.
#pragma once

#include <cstdint>

namespace accl {

enum class LogLevel : int { None = 0, Version = 1, Warn = 2, Info = 3, Abort = 4, Trace = 5 };

// Subsystem bits; values are ours (NCCL's mask is internal), names are NCCL's.
enum LogSubsys : uint64_t {
  kInit = 1u << 0, kColl = 1u << 1, kP2p = 1u << 2, kShm = 1u << 3, kNet = 1u << 4,
  kGraph = 1u << 5, kTuning = 1u << 6, kEnv = 1u << 7, kAlloc = 1u << 8, kCall = 1u << 9,
  kProxy = 1u << 10, kNvls = 1u << 11, kBootstrap = 1u << 12, kReg = 1u << 13,
  kProfile = 1u << 14, kRas = 1u << 15, kAll = ~0ull,
};

// Parses an NCCL_DEBUG_SUBSYS value ("INIT,NET", "^COLL", "ALL"); unknown names are ignored.
uint64_t parseSubsysMask(const char* spec);
// Parses an NCCL_DEBUG value (case-insensitive); unknown or empty -> `dflt`.
LogLevel parseLogLevel(const char* spec, LogLevel dflt);

void logMessage(LogLevel level, uint64_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
bool logEnabled(LogLevel level, uint64_t subsys);
// Forget the cached NCCL_DEBUG* settings (ncclResetDebugInit); the next log line re-reads them.
void resetLogInit();
// The text of the most recent WARN in this process ("" if none).
const char* lastWarning();
// The calling thread's last WARN ("" if none): with several ranks in one
// process, the process's last one may be another rank's.
const char* threadLastWarning();

}  // namespace accl

// NCCL_DEBUG=VERSION and above: the one line that says which library is in use.
#define VERSION_LOG(...)                                                                         \
  do {                                                                                          \
    if (::accl::logEnabled(::accl::LogLevel::Version, ::accl::kInit))                           \
      ::accl::logMessage(::accl::LogLevel::Version, ::accl::kInit, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define WARN(...) ::accl::logMessage(::accl::LogLevel::Warn, ::accl::kAll, __FILE__, __LINE__, __VA_ARGS__)
#define INFO(subsys, ...)                                                                        \
  do {                                                                                          \
    if (::accl::logEnabled(::accl::LogLevel::Info, (subsys)))                                   \
      ::accl::logMessage(::accl::LogLevel::Info, (subsys), __FILE__, __LINE__, __VA_ARGS__);    \
  } while (0)
#define TRACE(subsys, ...)                                                                       \
  do {                                                                                          \
    if (::accl::logEnabled(::accl::LogLevel::Trace, (subsys)))                                  \
      ::accl::logMessage(::accl::LogLevel::Trace, (subsys), __FILE__, __LINE__, __VA_ARGS__);   \
  } while (0)
