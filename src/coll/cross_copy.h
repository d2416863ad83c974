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

// Whether this process can read process `pid`'s memory: it reads the
// peer's process key (PeerInfo::processKey) at the address the peer gave
// (PeerInfo::reachProbe). pid 0 (a peer in another PID namespace) never is.
// errno says why not (ESRCH: gone, or another process holds that pid).
bool crossReachable(pid_t pid, uint64_t keyAddr, uint64_t key);

}  // namespace accl
