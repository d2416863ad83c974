#include "coll/cross_copy.h"

#include <sys/uio.h>

#include <cerrno>

namespace accl {

int crossCopy(pid_t pid, bool toPeer, uint64_t remote, char* local, size_t bytes, size_t* done) {
  *done = 0;
  while (*done < bytes) {  // a short transfer stops at a page it could not reach: once more from there
    iovec l{local + *done, bytes - *done}, r{reinterpret_cast<void*>(remote + *done), bytes - *done};
    const ssize_t got = toPeer ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got < 0) return errno;
    if (got == 0) return EFAULT;
    *done += static_cast<size_t>(got);
  }
  return 0;
}

bool crossReachable(pid_t pid, uint64_t keyAddr, uint64_t key) {
  if (pid == 0) {  // another PID namespace: its pid names another process here, or none
    errno = ESRCH;
    return false;
  }
  uint64_t got = 0;
  iovec local{&got, sizeof(got)}, remote{reinterpret_cast<void*>(keyAddr), sizeof(got)};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(sizeof(got))) return false;
  if (got != key) errno = ESRCH;  // another process with that pid (another pid namespace)
  return got == key;
}

}  // namespace accl
