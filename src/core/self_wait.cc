#include "core/self_wait.h"

#include <dirent.h>


#include "base/param.h"
#include "base/threads.h"
#include "base/wait.h"

namespace accl {
namespace {

// Whether the process may have a thread, besides the calling one and ACCL's
// own, that could still call the stuck rank. In doubt (no /proc), yes.
bool otherThreadsMayCall() {
  DIR* d = opendir("/proc/self/task");
  if (!d) return true;
  int tasks = 0;
  while (const dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++tasks;
  closedir(d);
  // ACCL's count never exceeds its threads, so a thread it cannot account
  // for reads as another user thread, never the reverse.
  return tasks - libraryThreads() > 1;
}

}  // namespace

const char* selfWaitStuck(ncclComm* comm, int k) {
  const unsigned long blocked = comm->caller.load(std::memory_order_acquire);
  if (blocked == 0 || k == comm->rank || !sameProcess(comm, k)) return nullptr;
  unsigned long driver = 0, caller = 0;
  if (!siblingThreads(comm, k, &driver, &caller) || caller != 0 || driver != blocked) {
    if (comm->selfWaitPeer == k) comm->selfWaitPeer = -1;
    return nullptr;
  }
#define ACCL_GROUP_THEM                                                                                  \
  "a thread that drives several ranks must group their calls (ncclGroupStart/ncclGroupEnd), or give each rank a " \
  "thread of its own"
  if (!otherThreadsMayCall())
    return "waits in vain: that rank lives in this process, its operations come from the thread blocked here, and no "
           "other thread could call it: " ACCL_GROUP_THEM;
  const int64_t graceMs = paramInt(Param::SelfWaitMs);
  if (graceMs <= 0) return nullptr;
  const uint64_t now = nowMs();
  if (comm->selfWaitPeer != k) {
    comm->selfWaitPeer = k;
    comm->selfWaitSinceMs = now;
    return nullptr;
  }
  if (now - comm->selfWaitSinceMs < static_cast<uint64_t>(graceMs)) return nullptr;
  return "waits in vain: that rank lives in this process, its operations come from the thread blocked here, and no "
         "other thread has called it for ACCL_SELF_WAIT_MS: " ACCL_GROUP_THEM
         " (raise ACCL_SELF_WAIT_MS if another thread calls it later)";
#undef ACCL_GROUP_THEM
}

}  // namespace accl
