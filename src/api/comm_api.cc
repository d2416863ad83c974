// Communicators made from others or from several ids: ncclCommSplit,
// ncclCommInitRankScalable, ncclCommGetUniqueId, ncclCommGrow; and buffer registration.
#include "api/api.h"

#include "api/init_common.h"

#include <cstring>
#include <functional>
#include <vector>

#include "base/check.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "coll/dev_comm.h"
#include "init/group.h"
#include "init/lifecycle.h"
#include "init/split.h"

namespace {

// A communicator made from `parent` (split, shrink): the parent's config unless
// one is given (as NCCL), the parent's device, and `make` run as its init.
ncclResult_t startChild(ncclComm* parent, ncclConfig_t* config,
                        std::function<ncclResult_t(ncclComm* child)> make, ncclComm_t* newcomm) {
  accl::CommConfig cfg = parent->config;
  if (config) NCCLCHECK(accl::readConfig(config, &cfg));
  auto* child = accl::commAlloc();
  child->config = cfg;
  child->cudaDev = parent->cudaDev;  // -1: host mode
  return acclStartInit(
      child,
      [parent, make, child] {
        const auto use = accl::CommUse::ifLive(parent);
        return use ? make(child) : accl::commGone(parent, "the parent of a split or shrink");
      },
      newcomm, parent);
}

// A communicator that new ones can be made from (split, grow): initialised, no error.
ncclResult_t checkParentReady(const ncclComm* comm, const char* fn) {
  if (!comm->initDone.load() || comm->asyncError.load() != ncclSuccess) {
    WARN("%s (%s, rank %d): the parent communicator is not ready or has failed", fn, comm->name.c_str(),
         comm->rank);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

}  // namespace

extern "C" ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                      ncclConfig_t* config) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  // Inside a group, a call that fails here fails the group (init/group.h).
  return accl::groupFail([&]() -> ncclResult_t {
    NCCLCHECK(acclCheckComm(comm, "ncclCommSplit"));
    if (!newcomm) {
      WARN("ncclCommSplit: newcomm is NULL");
      return ncclInvalidArgument;
    }
    *newcomm = nullptr;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
      WARN("ncclCommSplit: color %d is negative (use a color >= 0, or NCCL_SPLIT_NOCOLOR)", color);
      return ncclInvalidArgument;
    }
    NCCLCHECK(checkParentReady(comm, "ncclCommSplit"));
    if (config) {  // checked here too for a rank that gets no communicator
      accl::CommConfig cfg;
      NCCLCHECK(accl::readConfig(config, &cfg));
    }
    if (color == NCCL_SPLIT_NOCOLOR) {  // takes part in the exchange, gets no communicator
      auto job = [comm, key] {
        const auto use = accl::CommUse::ifLive(comm);
        return use ? accl::commSplit(comm, NCCL_SPLIT_NOCOLOR, key, nullptr) : accl::commGone(comm, "ncclCommSplit");
      };
      if (accl::groupActive()) {
        accl::groupEnqueueInit(job, {}, comm);
        return ncclSuccess;
      }
      return job();
    }
    return startChild(
        comm, config, [comm, color, key](ncclComm* child) { return accl::commSplit(comm, color, key, child); },
        newcomm);
  }());
  ACCL_API_GUARD_END("ncclCommSplit")
}
NCCL_API_ALIAS(ncclCommSplit)

extern "C" ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                       ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  // Inside a group, a call that fails here fails the group (init/group.h).
  return accl::groupFail([&]() -> ncclResult_t {
    NCCLCHECK(acclCheckComm(comm, "ncclCommShrink"));
    if (!newcomm) {
      WARN("ncclCommShrink: newcomm is NULL");
      return ncclInvalidArgument;
    }
    *newcomm = nullptr;
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
      WARN("ncclCommShrink: shrinkFlags 0x%x is not NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT", shrinkFlags);
      return ncclInvalidArgument;
    }
    if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList)) {
      WARN("ncclCommShrink: excludeRanksList is NULL with excludeRanksCount = %d", excludeRanksCount);
      return ncclInvalidArgument;
    }
    std::vector<int> excluded(excludeRanksList, excludeRanksList + excludeRanksCount);
    for (int r : excluded) {
      if (r < 0 || r >= comm->nranks) {
        WARN("ncclCommShrink (%s, rank %d): excluded rank %d is outside [0, nranks = %d)", comm->name.c_str(),
             comm->rank, r, comm->nranks);
        return ncclInvalidArgument;
      }
      if (r == comm->rank) {
        WARN("ncclCommShrink (%s, rank %d): this rank is in the exclude list; excluded ranks must not call it",
             comm->name.c_str(), comm->rank);
        return ncclInvalidArgument;
      }
    }
    if (!comm->initDone.load()) {
      WARN("ncclCommShrink (%s, rank %d): the parent communicator is still initialising", comm->name.c_str(),
           comm->rank);
      return ncclInvalidUsage;
    }
    // NCCL_SHRINK_ABORT: the parent's operations in flight stop first (after a failure).
    if (shrinkFlags == NCCL_SHRINK_ABORT) accl::commStopOperations(comm);
    return startChild(
        comm, config, [comm, excluded](ncclComm* child) { return accl::commShrink(comm, excluded, child); },
        newcomm);
  }());
  ACCL_API_GUARD_END("ncclCommShrink")
}
NCCL_API_ALIAS(ncclCommShrink)

// Existing ranks pass their communicator and rank -1 and keep their ranks;
// joining ranks pass comm NULL, the id and their new rank. The id comes from
// ncclCommGetUniqueId on the existing rank 0, which must pass it; the other
// existing ranks may pass NULL (they get rank 0's over the old communicator).
extern "C" ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                     ncclComm_t* newcomm, ncclConfig_t* config) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  const char* fn = "ncclCommGrow";
  if (!newcomm) {
    WARN("%s: newcomm is NULL", fn);
    return ncclInvalidArgument;
  }
  *newcomm = nullptr;
  if (!comm) {  // a joining rank: an ordinary init of the grown communicator
    if (!uniqueId) {
      WARN("%s: a joining rank (comm NULL) needs the uniqueId from ncclCommGetUniqueId", fn);
      return ncclInvalidArgument;
    }
    return acclInitRank(fn, newcomm, nRanks, *uniqueId, rank, config);
  }
  NCCLCHECK(acclCheckComm(comm, fn));
  if (rank != -1) {
    WARN("%s (%s, rank %d): an existing rank passes rank -1 (it keeps its rank); %d was given", fn,
         comm->name.c_str(), comm->rank, rank);
    return ncclInvalidArgument;
  }
  if (nRanks > accl::kMaxRanks) {
    WARN("%s (%s, rank %d): nRanks = %d is more than the %d ranks ACCL's bootstrap can take", fn,
         comm->name.c_str(), comm->rank, nRanks, accl::kMaxRanks);
    return ncclInvalidArgument;
  }
  if (nRanks <= comm->nranks) {
    WARN("%s (%s, rank %d): nRanks %d does not grow the communicator of %d ranks", fn, comm->name.c_str(),
         comm->rank, nRanks, comm->nranks);
    return ncclInvalidArgument;
  }
  if (comm->rank == 0 && !uniqueId) {
    WARN("%s (%s, rank 0): rank 0 must pass the uniqueId it made with ncclCommGetUniqueId", fn, comm->name.c_str());
    return ncclInvalidArgument;
  }
  NCCLCHECK(checkParentReady(comm, fn));
  struct Offer {  // what each existing rank brings to the allgather
    accl::SealedId id;  // sealed with this communicator's secret (bootstrap/wire.h)
    int32_t hasId;
    int32_t nRanks;
    int32_t failed;  // this rank could not seal its id (its WARN says why)
    int32_t pad;
  };
  accl::UniqueIdLayout given;
  memset(&given, 0, sizeof(given));
  if (uniqueId) memcpy(&given, uniqueId->internal, sizeof(given));
  const bool hasId = uniqueId != nullptr;
  return startChild(
      comm, config,
      [comm, given, hasId, nRanks](ncclComm* child) -> ncclResult_t {
        const uint32_t seq = comm->growCount++;  // here: every existing rank's grow that runs at all counts
        const uint8_t* key = comm->bootstrap->secret();
        auto ctxOf = [&](int q) { return accl::IdContext{comm->commHash, accl::kIdGrow, seq, q, 0}; };
        std::vector<Offer> all(comm->nranks);
        Offer& mine = all[comm->rank];
        // A rank that cannot seal its id still takes part (without it), so that none waits for it.
        const ncclResult_t sealed = hasId ? accl::sealId(key, ctxOf(comm->rank), given, &mine.id) : ncclSuccess;
        mine.hasId = hasId;
        mine.failed = sealed != ncclSuccess;
        mine.nRanks = nRanks;
        NCCLCHECK(comm->bootstrap->allgather(all.data(), sizeof(Offer)));
        NCCLCHECK(sealed);
        for (int q = 0; q < comm->nranks; ++q) {
          if (!all[q].failed) continue;
          WARN("ncclCommGrow (%s, rank %d): rank %d could not pass on its uniqueId (its WARN says why)",
               comm->name.c_str(), comm->rank, q);
          return ncclSystemError;
        }
        std::vector<accl::UniqueIdLayout> ids(comm->nranks);
        for (int q = 0; q < comm->nranks; ++q) {
          if (all[q].hasId && !accl::openId(key, ctxOf(q), all[q].id, &ids[q])) {
            WARN("ncclCommGrow (%s, rank %d): the uniqueId from rank %d does not verify: it was altered or swapped "
                 "on the way", comm->name.c_str(), comm->rank, q);
            return ncclSystemError;
          }
        }
        for (int q = 0; q < comm->nranks; ++q) {
          const Offer& o = all[q];
          if (o.nRanks != all[0].nRanks ||
              (o.hasId && memcmp(&ids[q], &ids[0], sizeof(ids[q])) != 0)) {
            WARN("ncclCommGrow (%s, rank %d): rank %d passes %s than rank 0: every existing rank must grow to the "
                 "same nRanks with rank 0's uniqueId (or NULL)", comm->name.c_str(), comm->rank, q,
                 o.nRanks != all[0].nRanks ? "another nRanks" : "another uniqueId");
            return ncclInvalidArgument;
          }
        }
        const accl::UniqueIdLayout& id = ids[0];
        if (!accl::uniqueIdValid(id)) {
          WARN("ncclCommGrow (%s, rank %d): rank 0's uniqueId was not made by ncclCommGetUniqueId", comm->name.c_str(),
               comm->rank);
          return ncclInvalidArgument;
        }
        return accl::commInit(child, id, all[0].nRanks, comm->rank);
      },
      newcomm);
  ACCL_API_GUARD_END("ncclCommGrow")
}
NCCL_API_ALIAS(ncclCommGrow)

extern "C" ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  NCCLCHECK(acclCheckComm(comm, "ncclCommRevoke"));
  if (revokeFlags != 0) {
    WARN("ncclCommRevoke: revokeFlags %d is not 0", revokeFlags);
    return ncclInvalidArgument;
  }
  // From any thread: no new operations; those in flight (here and on the
  // peers) end with an error. Shrink, destroy and abort still work.
  comm->revoked.store(true);
  accl::commStopOperations(comm);
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclCommRevoke")
}
NCCL_API_ALIAS(ncclCommRevoke)

extern "C" ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                 ncclUniqueId* commIds, ncclConfig_t* config) {
  ACCL_API_GUARD_BEGIN
  // Inside a group, a call that fails here fails the group (init/group.h).
  return accl::groupFail([&]() -> ncclResult_t {
    if (!newcomm || !commIds) {
      WARN("ncclCommInitRankScalable: %s is NULL", newcomm ? "commIds" : "newcomm");
      return ncclInvalidArgument;
    }
    *newcomm = nullptr;
    if (nId < 1) {
      WARN("ncclCommInitRankScalable: nId = %d must be at least 1", nId);
      return ncclInvalidArgument;
    }
    if (nranks < 1 || myrank < 0 || myrank >= nranks) {
      WARN("ncclCommInitRankScalable: rank %d of nranks %d is invalid", myrank, nranks);
      return ncclInvalidArgument;
    }
    std::vector<accl::UniqueIdLayout> ids(nId);
    for (int k = 0; k < nId; ++k) {
      memcpy(&ids[k], commIds[k].internal, sizeof(ids[k]));
      if (!accl::uniqueIdValid(ids[k])) {
        WARN("ncclCommInitRankScalable: commIds[%d] was not made by ncclGetUniqueId", k);
        return ncclInvalidArgument;
      }
    }
    accl::CommConfig cfg;
    NCCLCHECK(accl::readConfig(config, &cfg));
    NCCLCHECK(acclCheckMode("ncclCommInitRankScalable"));
    // ACCL's rendezvous handles thousands of ranks on one root: every rank uses
    // commIds[0], and the roots of the other ids are released (rank k mod nranks
    // releases id k) so that none of them lingers.
    // An id passed twice is released once (its root is gone after that).
    for (int k = 1; k < nId; ++k) {
      if (k % nranks != myrank) continue;
      bool seen = false;
      for (int j = 0; j < k && !seen; ++j) seen = memcmp(&ids[k].root, &ids[j].root, sizeof(ids[k].root)) == 0;
      if (!seen) accl::releaseRoot(ids[k]);
    }
    auto* comm = accl::commAlloc();
    comm->cudaDev = accl::devChoose(-1);
    comm->config = cfg;
    comm->rank = myrank;
    comm->nranks = nranks;
    accl::UniqueIdLayout id = ids[0];
    return acclStartInit(comm, [comm, id, nranks, myrank] { return accl::commInit(comm, id, nranks, myrank); },
                         newcomm);
  }());
  ACCL_API_GUARD_END("ncclCommInitRankScalable")
}
NCCL_API_ALIAS(ncclCommInitRankScalable)

extern "C" ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  NCCLCHECK(acclCheckComm(comm, "ncclCommGetUniqueId"));
  return pncclGetUniqueId(uniqueId);
  ACCL_API_GUARD_END("ncclCommGetUniqueId")
}
NCCL_API_ALIAS(ncclCommGetUniqueId)

extern "C" ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  NCCLCHECK(acclCheckComm(comm, "ncclCommRegister"));
  if (!handle || (!buff && size > 0)) {
    WARN("ncclCommRegister: %s is NULL", handle ? "buff" : "handle");
    return ncclInvalidArgument;
  }
  NCCLCHECK(acclCheckMemory(comm, buff, size, "ncclCommRegister"));
  // The executors copy through connector FIFOs (host memory or device slots),
  // so registration records the buffer (the handle is checked on
  // deregistration); ranks of several processes on one GPU also share a device
  // buffer's allocation, for the direct collectives (coll/dev_share.h).
  auto* reg = new accl::Registration{buff, size};
  accl::devRegister(comm, reg);
  comm->registrations.insert(reg);
  *handle = reg;
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclCommRegister")
}
NCCL_API_ALIAS(ncclCommRegister)

extern "C" ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  ACCL_API_GUARD_BEGIN
  const auto use = accl::CommUse::ifLive(comm);
  NCCLCHECK(acclCheckComm(comm, "ncclCommDeregister"));
  auto* reg = static_cast<accl::Registration*>(handle);
  if (!comm->registrations.erase(reg)) {
    WARN("ncclCommDeregister: handle %p was not returned by ncclCommRegister on this communicator "
         "(or was already deregistered)", handle);
    return ncclInvalidArgument;
  }
  const ncclResult_t r = accl::devDeregister(comm, reg);
  delete reg;
  NCCLCHECK(r);
  return ncclSuccess;
  ACCL_API_GUARD_END("ncclCommDeregister")
}
NCCL_API_ALIAS(ncclCommDeregister)
