// Device mode of a communicator: its CUDA device, its channels, the status
// word kernels report failures through, and the calls that run collectives and
// point-to-point batches as kernels on the caller's stream (coll/dev_coll.cc).
// Without CUDA (or without a device) none of this is used: comm->dev is NULL.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/handles.h"
#include "device/dev_types.h"
#include "nccl.h"

struct ncclComm;

namespace accl {

struct CollArgs;
struct PeerInfo;

// The device a new communicator gets: `requested` >= 0 (ncclCommInitAll's
// devlist), else the calling thread's current device, as NCCL. -1 in host mode.
int devChoose(int requested);
// Before the peer exchange: this rank's device identity and SM count (fills `me`).
ncclResult_t devProbe(ncclComm* comm, PeerInfo* me);
// After it: channels, the status word, the ring's device connectors.
ncclResult_t devSetup(ncclComm* comm);
// Device (or managed) memory: the call runs as a kernel. Host memory: on the host executor.
bool devBuffer(const void* p);
// Whether `n` bytes at device pointer `p` lie in one allocation (true where
// the driver cannot tell); *inside: the bytes from p to its end.
bool devRangeInside(const void* p, size_t n, size_t* inside);
// PreMulSum's scalar of a host-buffer call, where ncclScalarDevice put it in
// device memory: copied to `out` after the work before it on the call's
// stream (*copied false, nothing done: it is host memory, read it there).
ncclResult_t devReadScalar(const CollArgs& a, void* out, bool* copied);
// Enqueue on a.stream / the ops' stream; return at once.
ncclResult_t devRunCollective(const CollArgs& a);
ncclResult_t devRunP2p(ncclComm* comm, const std::vector<CollArgs>& ops);
// One launch for a group's parts (a communicator and its operations) where
// ACCL_GROUP_LAUNCH allows (devGroupLaunch): every rank of a communicator
// whose ranks all live in this process on one GPU, each with one collective,
// alike but for buffers and scalars, or each with one send and one receive
// that together form a permutation (sendrecv's ring, in place or not).
// devTogetherSets says which parts run so (a set per launch, with what the
// launch needs); ncclGroupEnd runs each set with devRunTogether where the
// set's first part would have run, and the other parts as usual.
using GroupPart = std::pair<ncclComm*, const std::vector<CollArgs>*>;
struct TogetherSet {
  std::vector<size_t> parts;  // indices into the group's parts, in rank order
  bool captured = false;      // the parts' streams are in one capture
  bool permutation = false;   // sends and receives, moved as `perm`; else alike collectives
  DevPermWork perm{};
};
bool devGroupLaunch();
std::vector<TogetherSet> devTogetherSets(const std::vector<GroupPart>& parts);
ncclResult_t devRunTogether(const std::vector<GroupPart>& parts, const TogetherSet& set);
// True when running `ops` (one communicator's part of a group) only queues
// kernels: every operation is on device buffers and every connection it needs
// exists, so nothing waits for a peer. ncclGroupEnd runs such parts inline
// rather than on a thread each.
bool devQueuesOnly(const ncclComm* comm, const std::vector<CollArgs>& ops);
// Whether all-to-all, gather and scatter on device buffers run as direct
// collectives (every rank in this process on this GPU, direct collectives
// allowed: the same answer on every rank); otherwise they are the sends and
// receives of coll/send_recv_colls.cc.
bool devDirectSendRecvColls(const ncclComm* comm);
// A stream-ordered copy of `bytes` of device memory at `src` on `stream`, after
// the communicator's earlier work, for an operation that must read its input
// after overwriting it (a send that a receive of its group overwrites; an
// all-to-all, gather or scatter whose buffers overlap outside NCCL's in-place
// layout); freed on the stream once the last holder lets go, which is after
// the operation's kernel was queued.
ncclResult_t devStagingCopy(ncclComm* comm, const void* src, size_t bytes, void* stream, std::shared_ptr<void>* out);
// ncclMemAlloc/ncclMemFree in device mode: device memory of the calling thread's
// current device (which CUDA IPC shares). devMemFree is false for memory that
// is not device memory (host-mode allocations).
ncclResult_t devMemAlloc(void** ptr, size_t size);
bool devMemFree(void* ptr);
// Device buffers in a communicator that spans hosts (coll/dev_staged.cc): one
// collective, or one communicator's sends and receives of a group, staged
// through pinned host memory and run by the host executor on a proxy thread,
// in the order of the caller's stream. Returns once queued.
ncclResult_t devRunStaged(ncclComm* comm, const std::vector<CollArgs>& ops);
// Such a communicator's collectives larger than the chunk its ranks agreed on
// (ACCL_STAGE_CHUNK_BYTES) run in chunks: the elements per chunk of `a` (its
// count: whole; always for a call already cut, or not between hosts).
size_t devStagedChunk(const CollArgs& a);
// The rule: elements per chunk of `a` among `nranks` ranks for chunks of about
// `chunkBytes` of its larger buffer (at most kMaxStageChunks; whole 64-byte lines).
constexpr size_t kMaxStageChunks = 64;
size_t stageChunkElems(const CollArgs& a, int nranks, int64_t chunkBytes);
// A host-buffer collective of such a communicator, in the same chunks as a
// device-buffer one, one after another on this thread: the ranks' host
// collectives pair up whatever buffers each rank passes. A PreMulSum scalar
// is read before (runCollective), not once per chunk.
ncclResult_t devRunHostChunks(const CollArgs& a, size_t per);
// The same for a call the proxy makes on a staged copy of `bytes` at `src`
// (device windows between hosts: the put goes out from the copy).
using StagedCall = std::function<ncclResult_t(const char* staged)>;
ncclResult_t devRunStagedCall(ncclComm* comm, void* stream, const void* src, size_t bytes, StagedCall call,
                              const char* opName);
// ncclCommRegister / ncclCommDeregister of a device buffer: ranks of several
// processes on one GPU share its allocation for the direct collectives
// (coll/dev_share.h); elsewhere nothing to do.
struct Registration;
void devRegister(ncclComm* comm, Registration* reg);
ncclResult_t devDeregister(ncclComm* comm, Registration* reg);
// Before the communicator's connections go (commFree): stops the peer watch's
// thread and the staging proxy, and lets go of the direct collectives' table.
void devStop(ncclComm* comm);
// Only the peer watch's thread: a communicator left allocated (calls still
// inside it) keeps the rest.
void devStopWatch(ncclComm* comm);
// The communicator failed or is being aborted: kernels that wait without a
// connector (ncclWaitSignal's) see it and leave. From any thread.
void devStopKernels(ncclComm* comm);
// A call on host buffers in a communicator that stages device buffers first
// waits for the staged work queued before it: both use the host executor's
// connections, in call order.
ncclResult_t devBeforeHostOp(ncclComm* comm);
// A kernel that stopped early becomes a WARN and the communicator's error.
ncclResult_t devCheck(ncclComm* comm);
// Waits for the communicator's last launched work (finalize).
ncclResult_t devWait(ncclComm* comm);

}  // namespace accl
