#include "base/debug.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "base/fork_safe.h"
#include "base/param.h"

namespace accl {
namespace {

struct LogState {
  std::mutex mu;
  std::atomic<bool> initialized{false};
  LogLevel level = LogLevel::Warn;
  // WARN lines print by default; the VERSION line only when NCCL_DEBUG asks
  // for it (as NCCL, which prints nothing unless NCCL_DEBUG is set).
  bool versionOn = false;
  uint64_t subsys = kInit | kBootstrap | kEnv;
  FILE* out = stderr;
  char host[64] = "";
  std::string lastWarn;
};

LogState& state() {
  static LogState* s = new LogState();  // never destroyed: logging works during exit
  return *s;
}
std::mutex& logMu() { return state().mu; }

// The calling thread's last WARN (lastWarning's is the process's, as NCCL's).
std::string& threadLastWarn() {
  thread_local std::string text;
  return text;
}
const HeldAcrossFork<logMu> logFreeAtFork;  // no child inherits a half-written line's lock

// The device in log lines: host mode has none, and NCCL then prints [0].
constexpr int kLogDevice = 0;

const struct { const char* name; uint64_t bit; } kSubsysNames[] = {
    {"INIT", kInit}, {"COLL", kColl}, {"P2P", kP2p}, {"SHM", kShm}, {"NET", kNet},
    {"GRAPH", kGraph}, {"TUNING", kTuning}, {"ENV", kEnv}, {"ALLOC", kAlloc}, {"CALL", kCall},
    {"PROXY", kProxy}, {"NVLS", kNvls}, {"BOOTSTRAP", kBootstrap}, {"REG", kReg},
    {"PROFILE", kProfile}, {"RAS", kRas}, {"ALL", kAll},
};

// Expands %h (hostname) and %p (pid) in an NCCL_DEBUG_FILE pattern.
std::string expandDebugFile(const char* pattern, const char* host) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '%' && p[1] == 'h') { out += host; ++p; }
    else if (p[0] == '%' && p[1] == 'p') { out += std::to_string(getpid()); ++p; }
    else out += *p;
  }
  return out;
}

// What NCCL_DEBUG* ask for, read before the log's lock is taken: that lock is
// held across fork() and so takes no other (base/fork_safe.h), and the
// parameters have a lock of their own.
struct LogSettings {
  LogLevel level = LogLevel::Warn;
  bool versionOn = false;
  uint64_t subsys = kInit | kBootstrap | kEnv;
  std::string file;
};

LogSettings readSettings() {
  LogSettings st;
  st.level = parseLogLevel(paramString(Param::Debug), LogLevel::Warn);
  st.versionOn = parseLogLevel(paramString(Param::Debug), LogLevel::None) >= LogLevel::Version;
  const char* sub = paramString(Param::DebugSubsys);
  if (sub && *sub) st.subsys = parseSubsysMask(sub);
  st.file = paramString(Param::DebugFile);
  return st;
}

// Takes the log's lock; a thread that finds the log set up takes nothing.
void ensureInit(LogState& s) {
  if (s.initialized.load(std::memory_order_acquire)) return;
  const LogSettings st = readSettings();
  std::lock_guard<std::mutex> g(s.mu);
  if (s.initialized.load(std::memory_order_relaxed)) return;
  s.level = st.level;
  s.versionOn = st.versionOn;
  s.subsys = st.subsys;
  if (gethostname(s.host, sizeof(s.host) - 1) != 0) strcpy(s.host, "unknown");
  if (char* dot = strchr(s.host, '.')) *dot = '\0';
  if (s.out != stderr) fclose(s.out);
  s.out = stderr;
  if (!st.file.empty()) {
    std::string path = expandDebugFile(st.file.c_str(), s.host);
    if (FILE* f = fopen(path.c_str(), "w")) { setvbuf(f, nullptr, _IOLBF, 0); s.out = f; }
  }
  s.initialized.store(true, std::memory_order_release);
}

}  // namespace

uint64_t parseSubsysMask(const char* spec) {
  if (!spec || !*spec) return kInit | kBootstrap | kEnv;
  bool invert = spec[0] == '^';
  if (invert) ++spec;
  uint64_t mask = 0;
  std::string all(spec);
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t comma = all.find(',', pos);
    std::string tok = all.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (const auto& n : kSubsysNames)
      if (strcasecmp(tok.c_str(), n.name) == 0) mask |= n.bit;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

LogLevel parseLogLevel(const char* spec, LogLevel dflt) {
  if (!spec || !*spec) return dflt;
  static const struct { const char* name; LogLevel level; } kLevels[] = {
      {"NONE", LogLevel::None}, {"VERSION", LogLevel::Version}, {"WARN", LogLevel::Warn},
      {"INFO", LogLevel::Info}, {"ABORT", LogLevel::Abort}, {"TRACE", LogLevel::Trace}};
  for (const auto& l : kLevels)
    if (strcasecmp(spec, l.name) == 0) return l.level;
  return dflt;
}

bool logEnabled(LogLevel level, uint64_t subsys) {
  LogState& s = state();
  ensureInit(s);
  if (level == LogLevel::Version) return s.versionOn;
  return static_cast<int>(level) <= static_cast<int>(s.level) && (level == LogLevel::Warn || (subsys & s.subsys));
}

void logMessage(LogLevel level, uint64_t subsys, const char* file, int line, const char* fmt, ...) {
  LogState& s = state();
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (level == LogLevel::Warn) threadLastWarn() = msg;
  ensureInit(s);
  std::lock_guard<std::mutex> g(s.mu);
  if (level == LogLevel::Warn) s.lastWarn = msg;
  if (level == LogLevel::Version) {
    if (!s.versionOn) return;
  } else {
    if (static_cast<int>(level) > static_cast<int>(s.level)) return;
    if (level != LogLevel::Warn && !(subsys & s.subsys)) return;
  }
  long tid = syscall(SYS_gettid);
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  if (level == LogLevel::Warn)
    fprintf(s.out, "%s:%d:%ld [%d] %s:%d NCCL WARN %s\n", s.host, getpid(), tid, kLogDevice, base, line, msg);
  else if (level == LogLevel::Trace)
    fprintf(s.out, "%s:%d:%ld [%d] %s:%d NCCL TRACE %s\n", s.host, getpid(), tid, kLogDevice, base, line, msg);
  else
    fprintf(s.out, "%s:%d:%ld [%d] NCCL INFO %s\n", s.host, getpid(), tid, kLogDevice, msg);
  fflush(s.out);
}

void resetLogInit() {
  LogState& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.initialized.store(false, std::memory_order_release);
}

const char* threadLastWarning() { return threadLastWarn().c_str(); }

const char* lastWarning() {
  // Returned pointer stays valid until the next WARN; callers copy it promptly.
  thread_local std::string copy;
  LogState& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  copy = s.lastWarn;
  return copy.c_str();
}

}  // namespace accl
