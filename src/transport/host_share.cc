#include "transport/host_share.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "base/debug.h"
#include "base/fork_safe.h"

namespace accl {
namespace {

struct Allocation {
  size_t bytes;
  int fd;
};

std::mutex mu;  // the allocations
std::mutex& allocationsLock() { return mu; }
const HeldAcrossFork<allocationsLock> allocationsFreeAtFork;  // a child may allocate and free too
std::map<uintptr_t, Allocation>& allocations() {  // by base address
  static auto* m = new std::map<uintptr_t, Allocation>();  // never destroyed: frees may follow static destructors
  return *m;
}

size_t pageSize() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// The first number a file holds, or SIZE_MAX (no file, or "max").
size_t numberIn(const char* path, const char* format, size_t scale) {
  FILE* f = fopen(path, "r");
  if (!f) return SIZE_MAX;
  char line[128];
  unsigned long long value = 0;
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) found = sscanf(line, format, &value) == 1;
  fclose(f);
  return found ? static_cast<size_t>(value) * scale : SIZE_MAX;
}

// What this process may still take without swapping: the host's MemAvailable,
// and within a cgroup (v2) its limit less what the cgroup already uses.
size_t availableBytes() {
  size_t bytes = numberIn("/proc/meminfo", "MemAvailable: %llu kB", 1024);
  const size_t limit = numberIn("/sys/fs/cgroup/memory.max", "%llu", 1);
  const size_t used = numberIn("/sys/fs/cgroup/memory.current", "%llu", 1);
  if (limit != SIZE_MAX && used != SIZE_MAX) bytes = std::min(bytes, limit > used ? limit - used : 0);
  return bytes;
}

}  // namespace

ncclResult_t hostShareAlloc(void** ptr, size_t size) {
  *ptr = nullptr;
  // Shared memory is taken page by page whatever the overcommit policy, so a
  // request beyond what the host has would end in the OOM killer, not an error.
  const size_t available = availableBytes();
  if (size > available) {
    WARN("ncclMemAlloc: %zu bytes is more than this host's available memory (%zu bytes, within this process's "
         "cgroup limit if any)", size, available);
    return ncclSystemError;
  }
  const size_t bytes = (size + pageSize() - 1) / pageSize() * pageSize();
  int fd = memfd_create("accl-ncclMemAlloc", MFD_CLOEXEC);
  if (fd < 0) {
    // Out of file descriptors (each allocation keeps one), or no memfd:
    // private memory, which windows of other processes cannot reach (their
    // collectives take the ring).
    INFO(kInit, "ncclMemAlloc: memfd_create failed (%s): %zu bytes of private memory instead", strerror(errno), size);
    if (posix_memalign(ptr, pageSize(), bytes) != 0) {
      *ptr = nullptr;
      WARN("ncclMemAlloc: cannot allocate %zu bytes of host memory", size);
      return ncclSystemError;
    }
    memset(*ptr, 0, bytes);
    return ncclSuccess;
  }
  // posix_fallocate: the pages exist now, so running out of memory is this
  // error and not a SIGBUS at first touch.
  int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    close(fd);
    WARN("ncclMemAlloc: cannot allocate %zu bytes of shareable host memory: %s", size, strerror(err));
    return ncclSystemError;
  }
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    close(fd);
    WARN("ncclMemAlloc: mmap of %zu bytes failed: %s", bytes, strerror(errno));
    return ncclSystemError;
  }
  std::lock_guard<std::mutex> lock(mu);
  allocations()[reinterpret_cast<uintptr_t>(m)] = {bytes, fd};
  *ptr = m;
  return ncclSuccess;
}

bool hostShareFree(void* ptr) {
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = allocations().find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations().end()) return false;
    a = it->second;
    allocations().erase(it);
  }
  munmap(ptr, a.bytes);
  close(a.fd);  // a peer's mapping keeps the pages until it unmaps them
  return true;
}

HostShareRef hostShareFind(const void* p, size_t bytes) {
  HostShareRef ref;
  ref.pid = static_cast<int32_t>(getpid());
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu);
  auto& m = allocations();
  auto it = m.upper_bound(a);
  if (it == m.begin()) return ref;
  --it;
  if (a - it->first > it->second.bytes || bytes > it->second.bytes - (a - it->first)) return ref;
  ref.fd = it->second.fd;
  ref.offset = a - it->first;
  ref.bytes = bytes;
  return ref;
}

ncclResult_t hostShareMap(const HostShareRef& ref, char** base, void** mapping, size_t* mappingBytes) {
  *base = nullptr;
  *mapping = nullptr;
  *mappingBytes = 0;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", ref.pid, ref.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    WARN("cannot open process %d's ncclMemAlloc memory (%s): %s", ref.pid, path, strerror(errno));
    return ncclSystemError;
  }
  const size_t start = ref.offset / pageSize() * pageSize();
  const size_t bytes = ref.offset - start + ref.bytes;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, static_cast<off_t>(start));
  close(fd);
  if (m == MAP_FAILED) {
    WARN("cannot map %zu bytes of process %d's ncclMemAlloc memory: %s", bytes, ref.pid, strerror(errno));
    return ncclSystemError;
  }
  *mapping = m;
  *mappingBytes = bytes;
  *base = static_cast<char*>(m) + (ref.offset - start);
  return ncclSuccess;
}

void hostShareUnmap(void* mapping, size_t mappingBytes) {
  if (mapping) munmap(mapping, mappingBytes);
}

}  // namespace accl
