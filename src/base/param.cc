#include "base/param.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "base/debug.h"
#include "base/fork_safe.h"

namespace accl {
namespace {

enum class Kind { Int, Str, Secret };

struct Def {
  const char* env;
  Kind kind;
  const char* dflt;
  int64_t lo, hi;  // an Int's range
  const char* doc;
};

const Def kDefs[] = {
#define X(id, env, kind, dflt, lo, hi, doc) {env, Kind::kind, dflt, lo, hi, doc},
#include "base/params.def"
#undef X
};
constexpr int kCount = static_cast<int>(Param::Count);

struct Cache {
  std::mutex mu;
  bool loaded = false;
  std::string value[kCount];
  std::string source[kCount];
  int64_t ival[kCount] = {};
  std::string problems;  // paramProblems()
};

Cache& cache() {
  static Cache* c = new Cache();
  return *c;
}
std::mutex& cacheLock() { return cache().mu; }
const HeldAcrossFork<cacheLock> cacheFreeAtFork;  // a child reads parameters in its first call

// A configuration file is a few lines: one larger than this is not one.
constexpr size_t kMaxConfBytes = 1 << 20;

// A regular file's text, at most kMaxConfBytes ("" and a line in *problems
// where it is larger, or not a regular file: a device or a pipe could block
// or never end).
std::string readFile(const std::string& path, std::string* problems) {
  // Opened without waiting (a pipe's open would wait for a writer), then
  // looked at through the descriptor: what is read is what was checked.
  const int fd = path.empty() ? -1 : open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st;
  std::string text;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return "";
  }
  if (!S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) > kMaxConfBytes) {
    *problems += path + " is " + (S_ISREG(st.st_mode) ? "larger than 1 MiB" : "not a regular file") +
                 ": ignored as a configuration file\n";
  } else {
    text.resize(kMaxConfBytes);
    size_t got = 0;
    for (ssize_t k; got < kMaxConfBytes && (k = read(fd, &text[got], kMaxConfBytes - got)) > 0;)
      got += static_cast<size_t>(k);
    text.resize(got);
  }
  close(fd);
  return text;
}

void loadLocked(Cache& c) {
  if (c.loaded) return;
  c.problems.clear();
  // NCCL's precedence: environment, then the user's file, then the system file.
  std::string userPath;
  if (const char* f = getenv("NCCL_CONF_FILE"); f && *f) userPath = f;
  else if (const char* home = getenv("HOME")) userPath = std::string(home) + "/.nccl.conf";
  auto user = parseConfText(readFile(userPath, &c.problems));
  auto sys = parseConfText(readFile("/etc/nccl.conf", &c.problems));
  for (int i = 0; i < kCount; ++i) {
    const Def& d = kDefs[i];
    const char* env = getenv(d.env);
    if (env) { c.value[i] = env; c.source[i] = "env"; }
    else if (user.count(d.env)) { c.value[i] = user[d.env]; c.source[i] = userPath; }
    else if (sys.count(d.env)) { c.value[i] = sys[d.env]; c.source[i] = "/etc/nccl.conf"; }
    else { c.value[i] = d.dflt; c.source[i] = "default"; }
    if (d.kind == Kind::Int) {
      int64_t v = 0;
      const bool parsed = parseIntValue(c.value[i].c_str(), &v);
      if (!parsed || v < d.lo || v > d.hi) {
        // No WARN here: logging reads params itself. Reported by dumpParams and at init.
        c.problems += std::string(d.env) + "=" + c.value[i] + " (" + c.source[i] + ") " +
                      (parsed ? "is outside [" + std::to_string(d.lo) + ", " + std::to_string(d.hi) + "]"
                              : std::string("is not an integer")) +
                      ": the default, " + d.dflt + ", is used\n";
        c.source[i] += parsed ? " (out of range, default used)" : " (invalid, default used)";
        c.value[i] = d.dflt;
        parseIntValue(d.dflt, &v);
      }
      c.ival[i] = v;
    }
  }
  c.loaded = true;
}

// A value as it may be shown: a secret's only as "(hidden)", when it is set.
std::string shown(int i, const Cache& c) {
  if (kDefs[i].kind != Kind::Secret || c.value[i].empty()) return c.value[i];
  return "(hidden)";
}

}  // namespace

std::map<std::string, std::string> parseConfText(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    auto trim = [](std::string s) {
      size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
      return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    std::string key = trim(line.substr(0, eq)), val = trim(line.substr(eq + 1));
    if (!key.empty()) out[key] = val;
  }
  return out;
}

bool parseIntValue(const char* s, int64_t* out) {
  if (!s) return false;
  while (isspace(static_cast<unsigned char>(*s))) ++s;
  if (!*s) return false;
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(s, &end, 0);
  if (end == s || errno == ERANGE) return false;
  int64_t mult = 1;
  switch (toupper(static_cast<unsigned char>(*end))) {
    case 'K': mult = 1ll << 10; ++end; break;
    case 'M': mult = 1ll << 20; ++end; break;
    case 'G': mult = 1ll << 30; ++end; break;
    default: break;
  }
  while (isspace(static_cast<unsigned char>(*end))) ++end;
  if (*end) return false;
  int64_t scaled = 0;
  if (__builtin_mul_overflow(static_cast<int64_t>(v), mult, &scaled)) return false;  // "16E" must not wrap into range
  *out = scaled;
  return true;
}

int64_t paramInt(Param p) {
  Cache& c = cache();
  std::lock_guard<std::mutex> g(c.mu);
  loadLocked(c);
  return c.ival[static_cast<int>(p)];
}

const char* paramString(Param p) {
  Cache& c = cache();
  std::lock_guard<std::mutex> g(c.mu);
  loadLocked(c);
  return c.value[static_cast<int>(p)].c_str();  // stable until resetParams()
}

bool paramIsSet(Param p) {
  Cache& c = cache();
  std::lock_guard<std::mutex> g(c.mu);
  loadLocked(c);
  const std::string& s = c.source[static_cast<int>(p)];
  return s != "default" && s.find("default used") == std::string::npos;
}

void resetParams() {
  Cache& c = cache();
  std::lock_guard<std::mutex> g(c.mu);
  c.loaded = false;
}

std::string paramProblems() {
  Cache& c = cache();
  std::lock_guard<std::mutex> g(c.mu);
  loadLocked(c);
  return c.problems;
}

int paramCount() { return kCount; }

int paramIndex(const char* env) {
  for (int i = 0; i < kCount; ++i)
    if (strcmp(kDefs[i].env, env) == 0) return i;
  return -1;
}

const char* paramName(int i) { return kDefs[i].env; }

ParamValue paramValue(int i) {
  Cache& c = cache();
  std::lock_guard<std::mutex> g(c.mu);
  loadLocked(c);
  if (kDefs[i].kind == Kind::Int) return {true, c.ival[i], std::to_string(c.ival[i])};
  return {false, 0, shown(i, c)};
}

std::string dumpParams() {
  Cache& c = cache();
  std::lock_guard<std::mutex> g(c.mu);
  loadLocked(c);
  std::string out;
  for (int i = 0; i < kCount; ++i)
    out += std::string(kDefs[i].env) + "=" + shown(i, c) + " (" + c.source[i] + ")  # " + kDefs[i].doc + "\n";
  return out;
}

}  // namespace accl
