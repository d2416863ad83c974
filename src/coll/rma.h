// One-sided operations on registered windows (ncclCommWindowRegister,
// ncclPutSignal, ncclSignal, ncclWaitSignal). This file: host memory. A
// communicator's windows are all host memory or all device memory (the first
// registration decides); device windows are stream work (coll/rma_dev.h).
//
// A put must land without the target calling anything, so each communicator
// that registered a window runs a receiver thread: it drains one connection
// from every peer (tag kTagRma: shm within a host, sockets between hosts),
// copies each put into the window it names and then counts the signal. A put
// is a header slot (window, offset, bytes, signal) and the data slots behind
// it, in order on one FIFO, so a signal is counted only after its data landed.
// The sender writes into the FIFO from its own thread and returns once the
// data is there; ncclWaitSignal waits (bounded) for the counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/handles.h"
#include "nccl.h"

struct ncclComm;

// What an ncclWindow_t points to: this rank's registration, and every rank's
// size (registrations are collective, so `index` names it on every rank).
struct ncclWindow_vidmem {
  uint64_t magic;
  ncclComm* comm;
  int index;
  void* base;
  size_t size;
  std::vector<size_t> sizes;  // by rank
  int flags;
  // Device windows (coll/rma_dev.h): every rank's window mapped into this
  // process (NULL where it has none), and the IPC mappings to close.
  bool device = false;
  std::vector<char*> peerBase;
  std::vector<void*> opened;
  // Host windows registered with NCCL_WIN_COLL_SYMMETRIC that every rank
  // could map (coll/host_direct.h): every rank's part as this process reaches
  // it, and the mappings of other processes' parts to unmap.
  bool hostDirect = false;
  std::vector<char*> hostPeerBase;
  std::vector<std::pair<void*, size_t>> hostMaps;
};

namespace accl {

constexpr uint64_t kWindowMagic = 0x776f646e69772d61ull;  // "a-window"

class RmaDev;

// Collective: every rank registers its buffer; the first registration also
// connects every pair of ranks and starts the receiver thread.
ncclResult_t rmaRegister(ncclComm* comm, void* buff, size_t size, int flags, ncclWindow_vidmem** out);
// Collective: waits until this rank's puts have landed everywhere, then every
// rank drops the window.
ncclResult_t rmaDeregister(ncclComm* comm, ncclWindow_vidmem* win);
// Writes `bytes` from `data` into `peer`'s part of `win` at `offset` (none when
// win is NULL and bytes 0: a bare signal), then raises one signal there.
// Device windows: queued on `stream`.
ncclResult_t rmaPut(ncclComm* comm, int peer, const ncclWindow_vidmem* win, size_t offset, const void* data,
                    size_t bytes, void* stream, const char* opName);
// Waits until each entry's peer has raised opCnt more signals, and consumes
// them. Device windows: the wait is queued on `stream`.
ncclResult_t rmaWait(ncclComm* comm, const ncclWaitSignalDesc_t* descs, int n, void* stream);
// The communicator's windows are device memory (then puts take device buffers).
bool rmaOnDevice(const ncclComm* comm);
// Sends a put (window `index`, or -1 for a bare signal) of host memory to
// `peer` on the communicator's one-sided connection: device windows on
// another host, from the staging proxy.
ncclResult_t rmaSend(ncclComm* comm, int peer, int index, size_t offset, const void* data, size_t bytes,
                     const char* opName);
// `win` is a registered window of this communicator (compares pointers only).
bool rmaHasWindow(ncclComm* comm, const ncclWindow_vidmem* win);
// `win` is a window some communicator handed out and has not freed (looked up
// by its value: safe on any pointer), and of *comm if that is set; *comm is
// then its communicator. Reading the window afterwards needs that
// communicator pinned (its destroy frees its windows after the pins go).
bool rmaWindowOf(const ncclWindow_vidmem* win, ncclComm** comm);
// The device windows' state (NULL until a device window is registered).
RmaDev* rmaDevOf(const ncclComm* comm);
// Host direct collectives (coll/host_direct.h): rank `rank`'s part of window
// `index` as this process reaches it (NULL: none, or not mapped).
char* rmaHostPeer(ncclComm* comm, int index, int rank);
// The window registered with NCCL_WIN_COLL_SYMMETRIC (a device window, or a
// host window every rank mapped) that holds `bytes` (> 0) at `p`: its index
// and p's offset there; false if none does.
bool rmaFindSymmetric(ncclComm* comm, const void* p, size_t bytes, int* index, size_t* offset);
// commFree: stops the receiver thread before the connections go.
void rmaStop(ncclComm* comm);

}  // namespace accl
