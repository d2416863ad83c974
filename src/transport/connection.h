// One direction of data between two ranks. A Connection owns a FIFO view and
// whatever keeps it alive (a shared-memory mapping, a socket and its proxy
// thread). The sending rank holds a send Connection, the receiving rank a recv
// Connection over the same logical FIFO.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/handles.h"
#include "device/dev_types.h"
#include "transport/fifo.h"
#include "transport/fifo_sleep.h"
#include "nccl.h"

struct ncclComm;

namespace accl {

class Connection {
 public:
  virtual ~Connection() = default;
  // Stop waiting and tell the peer (set the FIFO's abort flag, close the socket).
  // failedRank: the rank whose failure caused this (-1 unknown), passed on to the peer.
  virtual void abort(int failedRank) = 0;
  // Before a normal close: wait until everything posted has left this process.
  virtual ncclResult_t drain() { return ncclSuccess; }
  // The set-up's last step, which needs the peer to take part: called again
  // (without blocking) until *done (a network connection's connect or accept).
  virtual ncclResult_t settle(bool* done) {
    *done = true;
    return ncclSuccess;
  }
  // Moves what it can without blocking, in the calling thread (a socket's
  // frames; nothing for shared memory). Called by a rank that waits on the
  // FIFO; any failure is left for the wait's checks to find.
  virtual void progress() {}
  // A rank thread spins on this FIFO, calling progress() (true), or stopped
  // (false; `handOver`: it is going to sleep, so whatever helps it must wake).
  virtual void driving(bool on, bool handOver) { (void)on, (void)handOver; }
  // The sender posted slots up to `tail` (their byte counts are set).
  virtual void posted(uint64_t tail) { fifoPostTail(fifo.ctrl, tail); }
  // Whether a posted slot may name the sender's own memory as its payload
  // (`from`, Steps::postFrom): a socket writes it from there, which saves
  // the copy into the slot. The memory must stay as it is until the frame
  // has left (head passes it).
  virtual bool sendsFromMemory() const { return false; }
  // An operation ends, or fails, with frames posted from its memory still
  // unsent: they must never be read (the memory goes back to the caller).
  // The connection can carry nothing more after that.
  virtual void abandonFrom() {}
  // A device connector's per-channel table in GPU memory, for kernels
  // (nullptr: a connection only host threads use).
  virtual DevChan* devTable() const { return nullptr; }

  Fifo fifo;
  bool isSend = false;
  int peer = -1;
  bool device = false;        // a device connector (CUDA IPC, or the network's between hosts): only kernels wait on it
  const char* kind = "?";     // "shm", or "net (<backend> <NICs>)": for messages
  bool sharedCtrl = false;    // both ends map fifo.ctrl (shared memory between host buffers): sends may be pulled
  uint64_t step = 0;          // local counter: tail for a sender, head for a receiver
  uint64_t seenHead = 0;      // a sender's last read of the FIFO's head (coll/steps.h)
  const char* from[kSlots] = {};  // a sender's: where each posted slot's payload is (nullptr: the slot)
};


// Connects this rank to its peers: one send Connection to each of sendTo and
// one recv Connection from each of recvFrom, for connection `tag`. Pairwise:
// each pair of ranks that both ask for a connection between them sets it up,
// in phases that cannot deadlock, whatever order the ranks list their peers in.
// No global barrier: used at init (ring), on first use (trees) and inside groups (p2p).
ncclResult_t connectPeers(ncclComm* comm, const std::vector<int>& sendTo, const std::vector<int>& recvFrom,
                          int tag, std::vector<ConnPtr>* sends, std::vector<ConnPtr>* recvs);

// Shared-memory segments (shm.cc), named per (comm, sender, receiver, tag).
std::string shmSegmentName(const ncclComm* comm, int sender, int receiver, int tag);
// `what` names the segment's use in a WARN ("its FIFO from rank 3").
ncclResult_t shmSegmentCreate(ncclComm* comm, const std::string& what, const std::string& name, size_t bytes,
                              void** map);
ncclResult_t shmSegmentOpen(ncclComm* comm, const std::string& what, const std::string& name, size_t bytes,
                            void** map);
// The FIFO slot this rank asks for (NCCL_BUFFSIZE / 8, or ACCL_CHUNKSIZE);
// `acrossHosts` (host mode, ranks on several hosts): kBuffBytesAcrossHosts / 8
// where neither is set. Connections use ncclComm::slotBytes, the smallest of
// every rank's, agreed at init.
constexpr int64_t kBuffBytesAcrossHosts = 4 << 20;
size_t slotBytesParam(bool acrossHosts = false);

}  // namespace accl
