// Communicator life cycle: unique ids, init (blocking, non-blocking, grouped,
// all-in-one-process), finalize, destroy, abort, and the query calls.
#include "api/api.h"
#include "api/init_common.h"

#include <strings.h>

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "base/check.h"
#include "base/errors.h"
#include "base/mapped.h"
#include "base/param.h"
#include "base/threads.h"
#include "bootstrap/bootstrap.h"
#include "coll/dev_comm.h"
#include "core/comm.h"
#include "init/group.h"
#include "init/lifecycle.h"
#include "init/split.h"
#include "transport/connections.h"

using accl::commValid;

ncclResult_t acclCheckMode(const char* fn) {
  const char* mode = accl::paramString(accl::Param::Mode);
  if (strcasecmp(mode, "auto") != 0 && strcasecmp(mode, "host") != 0) {
    WARN("%s: ACCL_MODE=%s is not supported (use auto or host)", fn, mode);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

ncclResult_t acclCheckMemory(const ncclComm* comm, const void* buff, size_t size, const char* fn) {
  if (!buff || size == 0) return ncclSuccess;
  std::string why;
  if (comm->deviceMode && accl::devBuffer(buff)) {
    size_t inside = 0;
    if (accl::devRangeInside(buff, size, &inside)) return ncclSuccess;
    why = "its device allocation holds " + std::to_string(inside) + " bytes from there";
  } else if (accl::hostRangeMapped(buff, size, &why)) {
    return ncclSuccess;
  }
  WARN("%s: %zu bytes at %p are not all memory of this process: %s", fn, size, buff, why.c_str());
  return ncclInvalidArgument;
}

ncclResult_t acclCheckComm(const ncclComm* comm, const char* fn) {
  if (!comm) {
    WARN("%s: comm is NULL", fn);
    return ncclInvalidArgument;
  }
  if (!commValid(comm)) {
    WARN("%s: comm %p is not a live communicator (destroyed, aborted or never created)", fn,
         static_cast<const void*>(comm));
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t acclCheckInitDone(const ncclComm* comm, const char* fn) {
  NCCLCHECK(acclCheckComm(comm, fn));
  if (comm->initDone.load()) return ncclSuccess;
  WARN("%s (%s, rank %d): the communicator is still initialising (non-blocking init: poll "
       "ncclCommGetAsyncError until it is not ncclInProgress)", fn, comm->name.c_str(), comm->rank);
  return ncclInvalidUsage;
}

ncclResult_t acclCheckUsable(ncclComm* comm, const char* fn) {
  NCCLCHECK(acclCheckInitDone(comm, fn));
  if (comm->revoked.load()) {
    WARN("%s (%s, rank %d): the communicator was revoked (ncclCommRevoke); shrink, destroy or abort it", fn,
         comm->name.c_str(), comm->rank);
    return ncclInvalidUsage;
  }
  if (comm->suspended.load()) {
    WARN("%s (%s, rank %d): the communicator is suspended (ncclCommSuspend); resume it first (ncclCommResume)", fn,
         comm->name.c_str(), comm->rank);
    return ncclInvalidUsage;
  }
  int async = comm->deviceMode ? accl::devCheck(comm) : comm->asyncError.load();
  if (async != ncclSuccess) {
    WARN("%s (%s, rank %d): the communicator failed earlier (%s); abort or destroy it", fn, comm->name.c_str(),
         comm->rank, accl::errorString(static_cast<ncclResult_t>(async)));
    return static_cast<ncclResult_t>(async);
  }
  return ncclSuccess;
}

namespace {


// Finishes an init job: records its result where ncclCommGetAsyncError sees
// it, after initDone, so that a caller told ncclSuccess finds it usable.
ncclResult_t finishInit(ncclComm* comm, ncclResult_t r) {
  comm->initDone.store(true);
  if (r == ncclSuccess) {
    comm->asyncError.store(ncclSuccess);
  } else {
    comm->asyncError.store(r);
    accl::commSetError(comm, r);
  }
  return r;
}

// ncclComm::initOwner. Exactly one side frees a communicator whose init runs
// on a caller's thread: the init job, if it failed (with freeOnFailure) or an
// abort or destroy came meanwhile; else, later, the caller's destroy or abort.
enum InitOwner : int { kInitNone = 0, kInitRunning = 1, kInitAborted = 2, kInitFailed = 3 };

// An init job that owned its communicator is done with it (r: how the init
// went). True if the communicator lives on for the caller; false if it is
// freed now: another thread aborted or destroyed it meanwhile, or the init
// failed and `freeOnFailure` (a blocking init frees what it could not finish).
bool releaseInit(ncclComm* comm, ncclResult_t r, bool freeOnFailure) {
  int running = kInitRunning;
  const int next = r != ncclSuccess && freeOnFailure ? kInitFailed : kInitNone;
  if (comm->initOwner.compare_exchange_strong(running, next) && next == kInitNone) return true;
  accl::commFree(comm);  // waits until an abort that looked at it has left (CommUse)
  return false;
}

}  // namespace

ncclResult_t acclStartInit(ncclComm* comm, std::function<ncclResult_t()> job, ncclComm_t* out, ncclComm* parent) {
  comm->asyncError.store(ncclInProgress);
  // A non-blocking init has a thread of its own, which commFree joins; any
  // other runs on a caller's thread, and owns the comm until it returns.
  const bool owned = accl::groupActive() || comm->config.blocking;
  if (owned) comm->initOwner.store(kInitRunning);
  accl::registerComm(comm);
  *out = comm;
  auto run = [comm, job] { return finishInit(comm, job()); };
  if (accl::groupActive()) {
    return accl::groupEnqueueInit(
        [comm, run] {
          const ncclResult_t r = comm->abortFlag.load() ? ncclInvalidUsage : run();  // aborted before the group ended
          releaseInit(comm, r, /*freeOnFailure=*/false);  // a failed one stays for its caller to destroy
          return r;
        },
        [comm](ncclResult_t error) {  // another call of the group failed (or its parent went): it never runs
          releaseInit(comm, finishInit(comm, error), /*freeOnFailure=*/false);
        },
        parent, comm, "the init of a communicator in a group");
  }
  if (!owned) {
    // Where its thread cannot start, the init fails as one whose thread
    // failed: ncclCommGetAsyncError says so, and the caller aborts or destroys
    // it. Not run here instead: this thread may be about to start the other
    // ranks it waits for.
    if (accl::startThread(&comm->initThread, run, "the thread of a non-blocking init (the init fails)") != ncclSuccess)
      finishInit(comm, ncclSystemError);
    return ncclInProgress;
  }
  const int rank = comm->rank;
  ncclResult_t r = run();
  if (releaseInit(comm, r, /*freeOnFailure=*/true)) return r;
  *out = nullptr;
  if (r == ncclSuccess) {
    WARN("rank %d: another thread aborted or destroyed the communicator while its init ran", rank);
    r = ncclInvalidUsage;
  }
  return r;
}

namespace {

// Abort or destroy of a communicator whose init runs on a caller's thread:
// true if that init frees it (it is told to stop here) or freed it already,
// so the caller must not touch it again. Looks under a pin, which that
// init's free waits for (and which is gone before the caller's own free).
bool leftToItsInit(ncclComm* comm) {
  const auto use = accl::CommUse::ifLive(comm);
  if (!use) return true;  // its init failed and freed it since the caller's check
  int running = kInitRunning;
  if (comm->initOwner.compare_exchange_strong(running, kInitAborted)) {
    comm->abortFlag.store(1);
    accl::commStopOperations(comm);
    comm->bootstrap->shutdownAll();
    return true;
  }
  return running == kInitAborted || running == kInitFailed;  // already the init's to free
}

}  // namespace

ncclResult_t acclInitRank(const char* fn, ncclComm_t* out, int nranks, const ncclUniqueId& commId, int rank,
                          ncclConfig_t* config, int device) {
  // Inside a group, an init that fails here fails the group (init/group.h).
  return accl::groupFail([&]() -> ncclResult_t {
    if (!out) {
      WARN("%s: comm (the ncclComm_t* output) is NULL", fn);
      return ncclInvalidArgument;
    }
    *out = nullptr;
    if (nranks < 1 || nranks > accl::kMaxRanks) {
      WARN("%s: nranks = %d is outside [1, %d], the ranks ACCL's bootstrap can take", fn, nranks, accl::kMaxRanks);
      return ncclInvalidArgument;
    }
    if (rank < 0 || rank >= nranks) {
      WARN("%s: rank = %d is outside [0, nranks = %d)", fn, rank, nranks);
      return ncclInvalidArgument;
    }
    accl::UniqueIdLayout id;
    memcpy(&id, commId.internal, sizeof(id));
    if (!accl::uniqueIdValid(id)) {
      WARN("%s: the ncclUniqueId was not made by ncclGetUniqueId (bad magic or address)", fn);
      return ncclInvalidArgument;
    }
    accl::CommConfig cfg;
    NCCLCHECK(accl::readConfig(config, &cfg));
    NCCLCHECK(acclCheckMode(fn));
    auto* comm = accl::commAlloc();
    comm->config = cfg;
    comm->rank = rank;
    comm->nranks = nranks;
    comm->cudaDev = accl::devChoose(device);  // in the caller's thread: its current device, as NCCL
    return acclStartInit(comm, [comm, id, nranks, rank] { return accl::commInit(comm, id, nranks, rank); }, out);
  }());
}

extern "C" ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  ACCL_API_GUARD_BEGIN
  if (!uniqueId) {
    WARN("ncclGetUniqueId: uniqueId is NULL");
    return ncclInvalidArgument;
  }
  accl::UniqueIdLayout id;
  NCCLCHECK(accl::makeUniqueId(&id));
  memset(uniqueId, 0, sizeof(*uniqueId));
  memcpy(uniqueId->internal, &id, sizeof(id));
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclGetUniqueId")
}
NCCL_API_ALIAS(ncclGetUniqueId)

extern "C" ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                               ncclConfig_t* config) {
  ACCL_API_GUARD_BEGIN
  return acclInitRank("ncclCommInitRankConfig", comm, nranks, commId, rank, config);
  ACCL_API_GUARD_END("ncclCommInitRankConfig")
}
NCCL_API_ALIAS(ncclCommInitRankConfig)

extern "C" ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  ACCL_API_GUARD_BEGIN
  return acclInitRank("ncclCommInitRank", comm, nranks, commId, rank, nullptr);
  ACCL_API_GUARD_END("ncclCommInitRank")
}
NCCL_API_ALIAS(ncclCommInitRank)

extern "C" ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  ACCL_API_GUARD_BEGIN
  // Inside a group, a call that fails here fails the group (init/group.h).
  return accl::groupFail([&]() -> ncclResult_t {
    if (!comms) {
      WARN("ncclCommInitAll: comms is NULL");
      return ncclInvalidArgument;
    }
    if (ndev < 1 || ndev > accl::kMaxRanks) {
      WARN("ncclCommInitAll: ndev = %d is outside [1, %d], the ranks ACCL's bootstrap can take", ndev,
           accl::kMaxRanks);
      return ncclInvalidArgument;
    }
    // Host mode ignores devices; a negative device is still a caller bug. Repeats are allowed:
    // several ranks may share one device.
    for (int i = 0; devlist && i < ndev; ++i) {
      if (devlist[i] < 0) {
        WARN("ncclCommInitAll: devlist[%d] = %d is not a device", i, devlist[i]);
        return ncclInvalidArgument;
      }
    }
    for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
    ncclUniqueId id;
    NCCLCHECK(pncclGetUniqueId(&id));
    // Inside the caller's group the inits stay queued there after a failure:
    // that group's end fails them, and the caller destroys the communicators.
    const bool callersGroup = accl::groupActive();
    NCCLCHECK(accl::groupStart());
    ncclResult_t first = ncclSuccess;
    for (int i = 0; i < ndev; ++i) {
      ncclResult_t r = acclInitRank("ncclCommInitAll", &comms[i], ndev, id, i, nullptr, devlist ? devlist[i] : i);
      if (r != ncclSuccess && first == ncclSuccess) first = r;
    }
    ncclResult_t r = accl::groupEnd();
    if (first == ncclSuccess) first = r;
    if (first != ncclSuccess && !callersGroup) {
      for (int i = 0; i < ndev; ++i) {
        if (comms[i]) accl::commFree(comms[i]);
        comms[i] = nullptr;
      }
    }
    return first;
  }());
  ACCL_API_GUARD_END("ncclCommInitAll")
}
NCCL_API_ALIAS(ncclCommInitAll)

extern "C" ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  NCCLCHECK(acclCheckComm(comm, "ncclCommFinalize"));
  if (comm->finalized.exchange(true)) {  // NCCL's answer too
    WARN("ncclCommFinalize (%s, rank %d): the communicator was already finalized", comm->name.c_str(), comm->rank);
    return ncclInvalidArgument;
  }
  if (comm->initThread.joinable()) comm->initThread.join();
  // Host-mode calls complete before they return; what may still be in flight is
  // data a socket proxy has not put on the wire yet.
  ncclResult_t r = accl::devWait(comm);  // device mode: the last kernel has finished
  if (r == ncclSuccess) r = accl::commDrain(comm);
  if (r != ncclSuccess) {
    accl::commSetError(comm, r);
    return r;
  }
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclCommFinalize")
}
NCCL_API_ALIAS(ncclCommFinalize)

namespace {

// Destroy or abort inside a group: what the group queued on the communicator
// would run on freed memory at ncclGroupEnd, so it goes now, with a WARN.
void forgetQueued(ncclComm* comm, const char* fn) {
  const int dropped = accl::groupForget(comm);
  if (dropped > 0)
    WARN("%s (%s, rank %d): %d call(s) queued on it in this thread's open group are dropped", fn,
         comm->name.c_str(), comm->rank, dropped);
}

}  // namespace

extern "C" ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  ACCL_API_GUARD_BEGIN
  if (!comm) return ncclSuccess;  // as NCCL
  NCCLCHECK(acclCheckComm(comm, "ncclCommDestroy"));
  if (leftToItsInit(comm)) return ncclSuccess;
  forgetQueued(comm, "ncclCommDestroy");
  // Another thread is inside it: destroying it under that call aborts the call.
  // (In device mode the staging proxy counts too, and destroy waits for it below.)
  if (!comm->deviceMode && (comm->inFlight.load() > 0 || accl::commPinned(comm))) {
    WARN("ncclCommDestroy (%s, rank %d): calls of another thread are still inside the communicator; they are "
         "aborted", comm->name.c_str(), comm->rank);
    comm->abortFlag.store(1);
    accl::commStopOperations(comm);
  }
  if (comm->initThread.joinable()) comm->initThread.join();
  if (comm->asyncError.load() == ncclSuccess) {  // as NCCL: destroy finalizes first
    accl::CommUse use(comm);
    if (accl::devWait(comm) == ncclSuccess) (void)accl::commDrain(comm);
  }
  accl::commFree(comm);
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclCommDestroy")
}
NCCL_API_ALIAS(ncclCommDestroy)

extern "C" ncclResult_t pncclCommAbort(ncclComm_t comm) {
  ACCL_API_GUARD_BEGIN
  if (!comm) return ncclSuccess;  // as NCCL
  NCCLCHECK(acclCheckComm(comm, "ncclCommAbort"));
  if (leftToItsInit(comm)) return ncclSuccess;
  forgetQueued(comm, "ncclCommAbort");
  // From any thread: raise the flag every wait checks, tell the peers, then free
  // once the calls that were inside the comm have left.
  comm->abortFlag.store(1);
  accl::commStopOperations(comm);
  comm->bootstrap->shutdownAll();
  accl::commFree(comm);
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclCommAbort")
}
NCCL_API_ALIAS(ncclCommAbort)

extern "C" ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  NCCLCHECK(acclCheckComm(comm, "ncclCommGetAsyncError"));
  if (!asyncError) {
    WARN("ncclCommGetAsyncError: asyncError is NULL");
    return ncclInvalidArgument;
  }
  *asyncError = comm->deviceMode ? accl::devCheck(comm) : static_cast<ncclResult_t>(comm->asyncError.load());
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclCommGetAsyncError")
}
NCCL_API_ALIAS(ncclCommGetAsyncError)

namespace {

ncclResult_t queryInt(const ncclComm* comm, int* out, const char* fn, const char* what, int value) {
  NCCLCHECK(acclCheckComm(comm, fn));
  if (!out) {
    WARN("%s: %s is NULL", fn, what);
    return ncclInvalidArgument;
  }
  *out = value;
  return ncclSuccess;
}

}  // namespace

extern "C" ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  return queryInt(comm, count, "ncclCommCount", "count", use ? comm->nranks : 0);
  ACCL_API_GUARD_END("ncclCommCount")
}
NCCL_API_ALIAS(ncclCommCount)

extern "C" ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  return queryInt(comm, device, "ncclCommCuDevice", "device", use ? comm->cudaDev : -1);
  ACCL_API_GUARD_END("ncclCommCuDevice")
}
NCCL_API_ALIAS(ncclCommCuDevice)

extern "C" ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  return queryInt(comm, rank, "ncclCommUserRank", "rank", use ? comm->rank : -1);
  ACCL_API_GUARD_END("ncclCommUserRank")
}
NCCL_API_ALIAS(ncclCommUserRank)
