// Chooses a transport per peer (shared memory on one host, sockets between
// hosts) and sets the connections up in an order that cannot deadlock.
#include "core/check.h"
#include "core/comm.h"

namespace accl {

size_t slotBytesParam() {
  int64_t chunk = paramInt(Param::ChunkSize);
  int64_t buff = paramInt(Param::BuffSize);
  int64_t slot = chunk > 0 ? chunk : buff / kSlots;
  if (slot < 4096) slot = 4096;
  if (slot > (1 << 30)) slot = 1 << 30;
  return static_cast<size_t>(slot) & ~size_t(4095);
}

ncclResult_t connectPeers(ncclComm* comm, const std::vector<int>& sendTo, const std::vector<int>& recvFrom,
                          int tag, std::vector<ConnPtr>* sends, std::vector<ConnPtr>* recvs) {
  sends->clear();
  recvs->clear();
  sends->resize(sendTo.size());
  recvs->resize(recvFrom.size());
  // 1. Receivers create their shared-memory FIFOs; 2. a barrier; 3. senders map
  // them and open sockets (connect needs no accept: the listener queues it);
  // 4. receivers accept sockets; 5. a barrier, then the shm names are unlinked so
  // that nothing is left in /dev/shm even if a process dies later.
  for (size_t i = 0; i < recvFrom.size(); ++i)
    if (shmUsable(comm, recvFrom[i])) NCCLCHECK(shmCreateRecv(comm, recvFrom[i], tag, &(*recvs)[i]));
  NCCLCHECK(comm->bootstrap->barrier());
  for (size_t i = 0; i < sendTo.size(); ++i) {
    if (shmUsable(comm, sendTo[i])) NCCLCHECK(shmOpenSend(comm, sendTo[i], tag, &(*sends)[i]));
    else NCCLCHECK(netConnectSend(comm, sendTo[i], tag, &(*sends)[i]));
  }
  for (size_t i = 0; i < recvFrom.size(); ++i)
    if (!(*recvs)[i]) NCCLCHECK(netAcceptRecv(comm, recvFrom[i], tag, &(*recvs)[i]));
  NCCLCHECK(comm->bootstrap->barrier());
  for (auto& r : *recvs) shmUnlinkRecv(r.get());
  for (auto& s : *sends) INFO(kInit, "rank %d -> rank %d via %s (tag %d)", comm->rank, s->peer, s->kind, tag);
  return ncclSuccess;
}

}  // namespace accl
