// Cross memory attach: copies between this process's memory and a buffer of
// another process of this host (process_vm_readv/writev: one copy, made by
// the kernel, no mapping). The host direct collectives and pulled sends use
// it to reach buffers of ranks in other processes.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace accl {

// Copies `bytes` between `local` and `remote` in process `pid` (toPeer: from
// local into remote). Returns 0, or the errno that stopped it with *done
// bytes copied: ESRCH (the process is gone), EFAULT (a page on either side is
// not mapped, or the destination is read-only), EPERM (ptrace's rules).
int crossCopy(pid_t pid, bool toPeer, uint64_t remote, char* local, size_t bytes, size_t* done);

}  // namespace accl
