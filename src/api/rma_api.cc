// Windows and one-sided operations: ncclCommWindowRegister/Deregister,
// ncclWinGetUserPtr, ncclGetPeerDevicePointer, ncclPutSignal, ncclSignal,
// ncclWaitSignal (coll/rma.h, coll/rma_dev.h). As NCCL today, sigIdx, ctx and
// flags must be 0. Registration and deregistration inside a group run at its
// ncclGroupEnd (so one thread can register for several ranks); the one-sided
// operations may not be inside a group. On host windows
// the calls complete before they return (the stream is not used); on device
// windows they are queued on the stream.
#include "api/api.h"

#include "api/init_common.h"

#include <cstdint>

#include "base/check.h"
#include "coll/dev_comm.h"
#include "coll/rma.h"
#include "core/comm.h"
#include "init/group.h"

namespace {

// A usable communicator, outside any group (one-sided operations).
ncclResult_t checkUsable(ncclComm* comm, const char* fn) {
  NCCLCHECK(acclCheckUsable(comm, fn));
  if (accl::groupActive()) {
    WARN("%s: one-sided operations inside ncclGroupStart/ncclGroupEnd are not supported by ACCL yet "
         "(docs/api-status.md)", fn);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

ncclResult_t checkWindow(ncclComm* comm, const ncclWindow_vidmem* win, const char* fn) {
  if (!win || !accl::rmaWindowOf(win, &comm)) {  // the caller pinned comm
    WARN("%s: %p is not a live window of this communicator (ncclCommWindowRegister makes them)", fn,
         static_cast<const void*>(win));
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t checkSignal(ncclComm* comm, int peer, int sigIdx, int ctx, unsigned flags, const char* fn) {
  if (peer < 0 || peer >= comm->nranks) {
    WARN("%s: peer %d is outside [0, nranks = %d)", fn, peer, comm->nranks);
    return ncclInvalidArgument;
  }
  if (sigIdx != 0 || ctx != 0 || flags != 0) {
    WARN("%s: sigIdx (%d), ctx (%d) and flags (%u) must be 0, as in NCCL 2.30", fn, sigIdx, ctx, flags);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

// ncclSignal and ncclWaitSignal name no window: the communicator needs one.
ncclResult_t checkHasWindows(const ncclComm* comm, const char* fn) {
  if (!comm->rma) {
    WARN("%s (%s, rank %d): no window was registered on this communicator (one-sided calls need one)", fn,
         comm->name.c_str(), comm->rank);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

// Window (de)registration: now, or at ncclGroupEnd inside a group (as NCCL).
ncclResult_t nowOrAtGroupEnd(ncclComm* comm, std::function<ncclResult_t()> job) {
  if (!accl::groupActive()) return job();
  accl::groupEnqueueCommJob(comm, std::move(job));
  return ncclSuccess;
}

}  // namespace

extern "C" ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                               int winFlags) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  // Inside a group, a call that fails here fails the group (init/group.h).
  return accl::groupFail([&]() -> ncclResult_t {
    const char* fn = "ncclCommWindowRegister";
    NCCLCHECK(acclCheckUsable(comm, fn));
    if (!win) {
      WARN("%s: win is NULL", fn);
      return ncclInvalidArgument;
    }
    *win = nullptr;
    if (!buff && size > 0) {
      WARN("%s: buff is NULL with size %zu", fn, size);
      return ncclInvalidArgument;
    }
    NCCLCHECK(acclCheckMemory(comm, buff, size, fn));  // the one-sided calls' bounds come from it
    if (winFlags & ~(NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING)) {
      WARN("%s: unknown winFlags 0x%x (NCCL_WIN_DEFAULT, NCCL_WIN_COLL_SYMMETRIC, NCCL_WIN_STRICT_ORDERING)", fn,
           winFlags);
      return ncclInvalidArgument;
    }
    return nowOrAtGroupEnd(comm, [comm, buff, size, winFlags, win] {  // in a group, *win is set by ncclGroupEnd
      const auto use = accl::CommUse::ifLive(comm);
      return use ? accl::rmaRegister(comm, buff, size, winFlags, win) : accl::commGone(comm, "ncclCommWindowRegister");
    });
  }());
  ACCL_API_GUARD_END("ncclCommWindowRegister")
}
NCCL_API_ALIAS(ncclCommWindowRegister)

extern "C" ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  // Inside a group, a call that fails here fails the group (init/group.h).
  return accl::groupFail([&]() -> ncclResult_t {
    const char* fn = "ncclCommWindowDeregister";
    NCCLCHECK(acclCheckUsable(comm, fn));
    NCCLCHECK(checkWindow(comm, win, fn));
    return nowOrAtGroupEnd(comm, [comm, win, fn] {
      const auto use = accl::CommUse::ifLive(comm);
      if (!use) return accl::commGone(comm, fn);
      if (!accl::rmaHasWindow(comm, win)) {  // queued twice in one group: the first dropped it
        WARN("%s: window %p was already deregistered", fn, static_cast<void*>(win));
        return ncclInvalidUsage;
      }
      return accl::rmaDeregister(comm, win);
    });
  }());
  ACCL_API_GUARD_END("ncclCommWindowDeregister")
}
NCCL_API_ALIAS(ncclCommWindowDeregister)

extern "C" ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  const char* fn = "ncclWinGetUserPtr";
  NCCLCHECK(acclCheckComm(comm, fn));
  NCCLCHECK(checkWindow(comm, win, fn));
  if (!outUserPtr) {
    WARN("%s: outUserPtr is NULL", fn);
    return ncclInvalidArgument;
  }
  *outUserPtr = win->base;
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclWinGetUserPtr")
}
NCCL_API_ALIAS(ncclWinGetUserPtr)

// A device pointer to `peer`'s window at `offset` that this rank's kernels can
// load and store: for device windows and peers of this host. NULL (and
// ncclSuccess, as NCCL) for a peer that is not reachable that way, and for
// host windows.
extern "C" ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t win, size_t offset, int peer, void** outPtr) {
  ACCL_API_GUARD_BEGIN
  const char* fn = "ncclGetPeerDevicePointer";
  // Its communicator, pinned before the window is read (its destroy on
  // another thread frees the windows once the pins are gone), then the window
  // looked up again: it may have gone in between.
  ncclComm* owner = nullptr;
  const bool found = win && accl::rmaWindowOf(win, &owner);
  const auto use = accl::CommUse::ifLive(found ? owner : nullptr);
  if (!use || !accl::rmaWindowOf(win, &owner)) {
    WARN("%s: %p is not a live window (ncclCommWindowRegister makes them; deregistering frees them)", fn,
         static_cast<const void*>(win));
    return ncclInvalidArgument;
  }
  if (!outPtr) {
    WARN("%s: outPtr is NULL", fn);
    return ncclInvalidArgument;
  }
  *outPtr = nullptr;
  const int n = static_cast<int>(win->sizes.size());
  if (peer < 0 || peer >= n) {
    WARN("%s: peer %d is outside [0, nranks = %d)", fn, peer, n);
    return ncclInvalidArgument;
  }
  if (offset > win->sizes[peer]) {
    WARN("%s: offset %zu is beyond rank %d's window of %zu bytes", fn, offset, peer, win->sizes[peer]);
    return ncclInvalidArgument;
  }
  if (win->device && win->peerBase[peer]) *outPtr = win->peerBase[peer] + offset;
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclGetPeerDevicePointer")
}
NCCL_API_ALIAS(ncclGetPeerDevicePointer)

extern "C" ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                                      ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                                      unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  const char* fn = "ncclPutSignal";
  NCCLCHECK(checkUsable(comm, fn));
  NCCLCHECK(checkSignal(comm, peer, sigIdx, ctx, flags, fn));
  NCCLCHECK(checkWindow(comm, peerWin, fn));
  if (static_cast<int>(datatype) < 0 || static_cast<int>(datatype) >= ncclNumTypes) {
    WARN("%s: datatype %d is not an ncclDataType_t", fn, static_cast<int>(datatype));
    return ncclInvalidArgument;
  }
  const size_t esize = accl::typeSize(datatype);
  const size_t room = peerWin->sizes[peer];
  if (count > SIZE_MAX / esize || peerWinOffset > room || count * esize > room - peerWinOffset) {
    WARN("%s: %zu element(s) of %s at offset %zu do not fit rank %d's window of %zu bytes", fn, count,
         accl::typeName(datatype), peerWinOffset, peer, room);
    return ncclInvalidArgument;
  }
  if (count > 0 && !localbuff) {
    WARN("%s: localbuff is NULL with count %zu", fn, count);
    return ncclInvalidArgument;
  }
  if (count > 0 && !accl::rmaOnDevice(comm) && comm->deviceMode && accl::devBuffer(localbuff)) {
    WARN("%s (%s, rank %d): localbuff is device memory but the communicator's windows are host memory (put from "
         "host memory, or register device windows)", fn, comm->name.c_str(), comm->rank);
    return ncclInvalidUsage;
  }
  return accl::rmaPut(comm, peer, peerWin, peerWinOffset, localbuff, count * esize, stream, fn);
  ACCL_API_GUARD_END("ncclPutSignal")
}
NCCL_API_ALIAS(ncclPutSignal)

extern "C" ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                   cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  const char* fn = "ncclSignal";
  NCCLCHECK(checkUsable(comm, fn));
  NCCLCHECK(checkSignal(comm, peer, sigIdx, ctx, flags, fn));
  NCCLCHECK(checkHasWindows(comm, fn));
  return accl::rmaPut(comm, peer, nullptr, 0, nullptr, 0, stream, fn);
  ACCL_API_GUARD_END("ncclSignal")
}
NCCL_API_ALIAS(ncclSignal)

extern "C" ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                                       cudaStream_t stream) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  const char* fn = "ncclWaitSignal";
  NCCLCHECK(checkUsable(comm, fn));
  if (nDesc < 0 || (nDesc > 0 && !signalDescs)) {
    WARN("%s: nDesc %d with signalDescs %p", fn, nDesc, static_cast<void*>(signalDescs));
    return ncclInvalidArgument;
  }
  for (int i = 0; i < nDesc; ++i) {
    const ncclWaitSignalDesc_t& d = signalDescs[i];
    NCCLCHECK(checkSignal(comm, d.peer, d.sigIdx, d.ctx, 0, fn));
    if (d.opCnt < 0) {
      WARN("%s: signalDescs[%d].opCnt is %d (must be >= 0)", fn, i, d.opCnt);
      return ncclInvalidArgument;
    }
  }
  if (nDesc > 0) NCCLCHECK(checkHasWindows(comm, fn));
  return nDesc > 0 ? accl::rmaWait(comm, signalDescs, nDesc, stream) : ncclSuccess;
  ACCL_API_GUARD_END("ncclWaitSignal")
}
NCCL_API_ALIAS(ncclWaitSignal)
