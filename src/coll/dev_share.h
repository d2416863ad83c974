// Direct collectives of ranks in several processes on one GPU: what makes a
// peer's buffers reachable from this process's kernels.
//
// At init each rank allocates its direct slot (dev_types.h DevDirectSlot) and
// every rank maps every other's through CUDA IPC. Buffers are reached through
// symmetric windows (coll/rma_dev.cc) or through registrations:
//
// - ncclCommRegister of device memory exports the allocation it lies in: the
//   rank writes the allocation's IPC handle into its table, one per rank in a
//   shared memory segment of the communicator, under the next id.
// - Before each collective a rank maps the entries its peers added since its
//   last look (a table in device memory holds them by peer and id), and
//   publishes, per peer, the id below which it has mapped everything live.
// - A call's buffers are published by registration id and offset; the
//   kernels run direct only where every rank has mapped what it needs, and
//   all agree on the ring otherwise (device/dev_direct.cuh). So a
//   registration is used from the first call after every peer has seen it.
// - ncclCommDeregister waits for the communicator's work on the device, then
//   marks the entry dead; peers unmap it at their next collective. A kernel
//   publishes a registration only while it is live (a device table of the
//   rank's live ids): a graph captured before a deregistration replays on
//   the ring, never on an unmapped buffer.
// - Ranks of the same process reach each other's slots and registrations at
//   their addresses (a process cannot map its own memory through CUDA IPC).
//
// The tables' bookkeeping (ids, places, what a peer has mapped) is
// coll/reg_table.h, apart from CUDA and unit-tested. Only built with the CUDA
// executor (ACCL_HAVE_DEVICE_PATH).
#pragma once

#include <cstddef>
#include <memory>

#include "nccl.h"

struct ncclComm;

namespace accl {

struct DevCollWork;
struct Registration;

class DevShare;
struct DevShareDeleter {
  void operator()(DevShare* s) const;
};
using DevSharePtr = std::unique_ptr<DevShare, DevShareDeleter>;

// Collective, at init, on communicators whose ranks are all on this GPU in
// several processes (`want`: this rank allows direct collectives). Leaves
// *out empty (and says why in an INFO line) on every rank when any rank
// does not take part. The share must outlive the kernels that use it: it
// goes with the device state, after the connectors' release waited for them.
ncclResult_t devShareSetup(ncclComm* comm, bool want, DevSharePtr* out);

// A direct-capable call: w's slots, this rank's buffers by window or
// registration, and what it has mapped of its peers' registrations (mapping
// what is new first; a mapping that fails is WARNed and leaves that peer's
// later registrations to the ring, so the call itself always goes ahead).
void devSharePrepare(ncclComm* comm, DevShare* share, DevCollWork* w, size_t sendBytes, size_t recvBytes,
                     bool capturing);

// ncclCommRegister / ncclCommDeregister of device memory on such a
// communicator. Registration never fails for want of sharing: a buffer that
// cannot be exported (not cudaMalloc memory, or too many registrations) is
// recorded and its calls take the ring (an INFO line says why).
void devShareRegister(ncclComm* comm, DevShare* share, Registration* reg);
ncclResult_t devShareDeregister(ncclComm* comm, DevShare* share, Registration* reg);

// Destroy: how many calls ran direct and how many on the ring (INFO).
void devShareReport(ncclComm* comm, DevShare* share);

}  // namespace accl
