// Windows of device memory (device mode): one-sided operations as stream work.
//
// Every peer of this host has its window and signal array mapped into this
// process at registration: a peer in this process by its address, a peer in
// another process through CUDA IPC (the window must be cudaMalloc or
// ncclMemAlloc memory). A put to such a peer is a copy on the caller's stream
// straight into its window, followed by a one-thread kernel that adds 1 to this
// rank's counter in its signal array. A put to a peer on another host is
// staged: copied into pinned memory on the stream and sent by the
// communicator's proxy thread over the one-sided connection (coll/rma.cc); the
// receiver thread there copies it into the device window and raises the signal
// with the same kernel. ncclWaitSignal is a one-thread kernel on the stream
// that waits until the counters it needs have risen, and consumes them. All of
// it follows the communicator's stream order (dev_state.h's ordered()), like
// its collectives.
//
// The same mappings let ranks of several processes on one GPU run the direct
// collectives (device/dev_direct.cuh) on buffers in windows registered with
// NCCL_WIN_COLL_SYMMETRIC: a table in device memory holds every rank's window
// of each index as mapped here; the ranks publish (in their direct slots,
// coll/dev_share.cc) which window and offset each call's buffers have.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "nccl.h"

struct ncclComm;
struct ncclWindow_vidmem;

namespace accl {

struct DevCollWork;

// What a rank tells the others about its device window (and signal array) in
// the registration's allgather. Plain bytes: IPC handles are 64 bytes.
struct RmaDevExport {
  int32_t ok;         // the handles below were made
  int32_t cudaDev;
  uint64_t base;      // the window's address in its own process
  uint64_t winOffset; // of the window in its allocation (IPC maps allocations)
  uint64_t signals;   // the signal array's address in its own process
  char winHandle[64];
  char sigHandle[64];
};

class RmaDev;
struct RmaDevDeleter {
  void operator()(RmaDev* d) const;
};
using RmaDevPtr = std::unique_ptr<RmaDev, RmaDevDeleter>;

// Fills `out` for this rank's window at `buff` (making the signal array on
// first use into *dev). Failures are reported in out->ok (and a WARN), so that
// the collective registration still runs and every rank fails together.
void rmaDevExport(ncclComm* comm, RmaDevPtr* dev, void* buff, RmaDevExport* out);
// Maps every peer's window (and, the first time, signal array) into this
// process. Every rank must be on this host.
ncclResult_t rmaDevAttach(ncclComm* comm, RmaDev* dev, ncclWindow_vidmem* win, const std::vector<RmaDevExport>& all);
// Unmaps what rmaDevAttach mapped for `win`.
void rmaDevDetach(RmaDev* dev, ncclWindow_vidmem* win);
// Enqueues on `stream`: `bytes` from `src` into `peer`'s window at `offset`
// (none for a bare signal), then one signal there.
ncclResult_t rmaDevPut(ncclComm* comm, RmaDev* dev, int peer, const ncclWindow_vidmem* win, size_t offset,
                       const void* src, size_t bytes, void* stream, const char* opName);
// Enqueues ncclWaitSignal's wait on `stream`.
ncclResult_t rmaDevWait(ncclComm* comm, RmaDev* dev, const ncclWaitSignalDesc_t* descs, int n, void* stream);
// The receiver thread (a put from another host): copies `bytes` at `src` into
// the device window at `dst` (done before it returns: `src` is a FIFO slot);
// then raises one signal from `peer` in this rank's array.
ncclResult_t rmaDevLand(ncclComm* comm, RmaDev* dev, char* dst, const void* src, size_t bytes);
ncclResult_t rmaDevRaise(ncclComm* comm, RmaDev* dev, int peer);
// Deregistration: the receiver's copies and signals have finished.
ncclResult_t rmaDevFlush(ncclComm* comm, RmaDev* dev);
// Direct collectives of ranks in several processes on one GPU: w's window
// table, and the window and offset of each of w's buffers that lies in a
// window registered with NCCL_WIN_COLL_SYMMETRIC (-1: in none).
void rmaDevDirect(ncclComm* comm, RmaDev* dev, DevCollWork* w, size_t sendBytes, size_t recvBytes);
// Wait kernels were queued that have not ended (the receiver thread then
// watches the peers, so that a dead one ends them).
bool rmaDevWaiting(const RmaDev* dev);

}  // namespace accl
