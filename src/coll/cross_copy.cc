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

}  // namespace accl
