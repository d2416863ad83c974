// What the host hands the CUDA executor, shared by host code and kernels (no
// CUDA headers): device connectors, the status word a kernel reports through,
// and the work descriptors passed to a launch by value.
//
// A device connector is one FIFO per channel. Its data slots and the
// sender's counters (tail, byte counts) are GPU memory the receiver owns (the
// sender reaches them through CUDA IPC); its control block is the host FIFO's
// (transport/fifo.h), in POSIX shared memory registered with CUDA: the
// receiver's counter (head) and the abort flag, so host code can abort a
// kernel that waits, in this process or another. Each side polls only memory
// that outlives its peer (its own GPU memory, or the shared control block):
// a kernel must never wait on memory a dead process may have freed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/fifo_slots.h"

namespace accl {

// FifoCtrl as kernels see it (same layout; checked in transport/ipc.cc).
// Device connectors keep tail and bytes in DevCounters instead.
struct DevFifoCtrl {
  volatile uint64_t tail;  // unused by device connectors
  uint32_t tailSleepers;   // host threads only
  volatile uint32_t bytes[kSlots];  // unused by device connectors
  char pad0[20];
  volatile uint64_t head;
  uint32_t headSleepers;
  char pad1[52];
  volatile uint32_t abort;
  volatile uint32_t peerGone;
  volatile int32_t failedRank;
  int32_t senderPid, receiverPid;
};

// The sender's counters of one channel. CUDA IPC connectors keep them after
// the slots in the receiver's GPU memory, where the receiver polls them: in
// L2 rather than over PCIe, and between ranks of one GPU a step needs a fence
// of GPU scope, not of system scope. A network connector between hosts keeps
// them, and its slots, in pinned host memory, each side its own copy, which
// its proxy fills or drains. (The sender waits on head only when all slots
// are in flight.)
struct alignas(128) DevCounters {
  volatile uint64_t tail;
  volatile uint32_t bytes[kSlots];  // payload of each posted slot
  char pad[128 - 8 - 4 * kSlots];
};
static_assert(sizeof(DevCounters) == 128, "one line");

// One channel of one connector, in device memory. `step` persists between
// kernels (and between replays of a captured graph).
struct DevChan {
  char* slots;         // kSlots * slotBytes of the receiver's GPU memory
  DevCounters* cnt;    // this channel's tail and bytes, in the same allocation
  DevFifoCtrl* ctrl;   // device view of the shared control block (head, abort)
  uint64_t step;       // tail (sender) or head (receiver) of this side
  // The peer's counter as this side last read it, kept between kernels: a
  // sender's the receiver's head (a kernel's sends may finish before the
  // receiver ran, a send that fits the slots, so the next kernel's slots are
  // free only up to it, not up to `step`); a receiver's the sender's tail.
  uint64_t seen;
  uint64_t slotBytes;
  int32_t crossGpu;    // the ranks use different GPUs: steps fence at system scope
};

// Why a kernel stopped early; the host turns it into a WARN and an error.
enum DevReason : int32_t { kDevOk = 0, kDevTimeout = 1, kDevPeerFailed = 2, kDevSizeMismatch = 3,
                           kDevStageTimeout = 4,    // waited too long for the proxy of a staged operation
                           kDevSignalTimeout = 5,   // ncclWaitSignal: the signals did not come in time
                           kDevSignalStopped = 6,   // ncclWaitSignal: the communicator failed or was aborted
                           kDevAsymmetric = 7,      // direct on windows: a peer's buffers lie at other offsets
                           kDevCountMismatch = 8,   // direct: a peer called with another count
                           kDevStageStopped = 9 };  // a staged operation: the communicator failed or was aborted

// Host-mapped; written once by the first block that fails.
struct DevStatus {
  volatile int32_t reason;
  volatile int32_t peer;        // the rank waited for
  volatile int32_t failedRank;  // from the peer's abort, -1 unknown
  volatile int32_t isSend;
  volatile uint64_t expected, got;  // kDevSizeMismatch, kDevCountMismatch (elements); kDevSignal*: signals
  volatile int32_t stop;            // set by the host when the communicator fails or is aborted
};

enum class DevOp : int32_t { Sum, Prod, Max, Min, PreMulSum, SumPostDiv };
enum class DevColl : int32_t { Local, AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, Gather, Scatter };

// Direct collectives: ranks on one GPU read each other's buffers and write
// each other's outputs, with no connector in between. Each rank has a slot in
// device memory that every rank's kernels reach: ranks of one process share a
// table (coll/dev_direct.cc); ranks in several processes map each other's slot
// through CUDA IPC at init (coll/dev_share.cc). The counters live in device
// memory, so a replayed graph continues them.
//
// Ranks in several processes reach a peer's buffer only where it is mapped in
// their process: in a window registered with NCCL_WIN_COLL_SYMMETRIC (mapped
// at registration, by every rank), or in an allocation the peer registered
// with ncclCommRegister (mapped when a rank next calls a collective after the
// registration). Every rank publishes how its buffers are reached and, per
// peer, up to which registration it has mapped that peer's; all ranks then
// take the same decision from the same slots: direct when every buffer a
// peer uses is reachable by every rank that uses it, else the ring.
constexpr int kDevMaxDirect = 16;         // ranks; more use the ring
constexpr int kDevMaxDirectWindows = 64;  // symmetric windows (by index) that direct calls can use
constexpr int kDevMaxRegistrations = 256; // live exported registrations per rank (more: the ring)
struct DevDirectSlot {
  // This rank's buffers for call `published`: their addresses (ranks of one
  // process), or their offsets in windows sendWin and recvWin (-1: in none),
  // or else in registrations sendReg and recvReg (id + 1; 0: in none).
  const void* volatile send;
  void* volatile recv;
  volatile int32_t sendWin, recvWin;
  volatile uint32_t sendReg, recvReg;
  volatile uint64_t published;  // the call whose buffers are above
  volatile uint64_t bytes;      // of call `published` (must agree on every rank)
  volatile uint64_t scalar;     // PreMulSum: this rank's scalar (the bits of a T), for its own input
  uint64_t calls;               // direct-capable calls this rank finished (read at kernel start)
  uint64_t base;                // `finished` when call `calls` ended
  unsigned long long finished;  // blocks of this rank that finished such a call, ever
  volatile uint32_t mapped[kDevMaxDirect];  // rank k's registrations with ids below mapped[k] are mapped here
  uint64_t directRuns, ringRuns;  // ranks in several processes: how this rank's calls ran (read at destroy)
  char pad[32];
};
static_assert(sizeof(DevDirectSlot) == 192, "slots are 64-byte aligned");

// Common to every launch.
struct DevCtx {
  DevStatus* status;
  uint64_t timeoutNs;  // 0: none
  int32_t rank, nranks;
};

// A collective over the ring: block c runs channel c on its slice.
struct DevCollWork {
  DevCtx ctx;
  DevColl coll;
  int32_t type;  // ncclDataType_t
  DevOp op;
  int32_t root;
  int32_t nChannels;      // blocks (channels used by this call)
  int32_t nChannelsConn;  // channels of the connectors (for abort)
  const void* send;
  void* recv;
  size_t count;  // per rank for AllGather/ReduceScatter
  DevChan* sendCh;  // to the ring's next rank, per channel
  DevChan* recvCh;  // from the ring's previous rank
  double scalarF;
  int64_t scalarI;
  const void* scalarPtr;  // PreMulSum with ncclScalarDevice: read by the kernel
  // The direct algorithm (blocks split the work) when slots[0] is set; else
  // the ring. Ranks in several processes (`shared`) may still agree on the
  // ring at run time; its channels are then the first nChannels blocks.
  DevDirectSlot* slots[kDevMaxDirect];  // every rank's slot, as this process reaches it
  int32_t shared;  // ranks in several processes: buffers are published as windows or registrations
  // Every rank's window of each index, as mapped here
  // (winBases[index * kDevMaxDirect + rank]; NULL: no window table).
  char* const* winBases;
  int32_t winCount;
  int32_t sendWin, recvWin;  // this rank's windows (-1: its buffer is in none) and the offsets there
  size_t sendOff, recvOff;
  // Every rank's registrations as mapped here (regBases[rank * kDevMaxRegistrations
  // + id % kDevMaxRegistrations]); this rank's (id + 1, 0: none) and offsets in them.
  char* const* regBases;
  const uint32_t* liveIds;  // this rank's live registration ids by place (~0u: none), checked at run time
  uint32_t sendReg, recvReg;
  size_t sendRegOff, recvRegOff;
  uint32_t mapped[kDevMaxDirect];  // what this rank publishes as its slot's `mapped`
};

// One launch for the direct calls of every rank of a communicator whose
// ranks all live in this process on one GPU (one group, one call each:
// coll/dev_coll.cc devRunTogether). Blocks [k x blocksPerRank, (k + 1) x
// blocksPerRank) run rank k's part, as its own launch of blocksPerRank
// blocks would, with rank k's buffers and scalars from parts[k]. One launch
// starts every rank's blocks at once, where separate launches start one
// after another (and the ranks' start barrier waits for the last).
struct DevRankPart {
  const void* send;
  void* recv;
  double scalarF;
  int64_t scalarI;
  const void* scalarPtr;
};
struct DevFusedWork {
  DevCollWork w;  // what the ranks share: the collective, type, op, count, root, nranks
  int32_t blocksPerRank;
  int32_t pad;
  DevRankPart parts[kDevMaxDirect];
};

// Direct collectives: whether the other ranks' blocks read rank k's send
// buffer (write its receive buffer). Window mode needs exactly those in windows.
#ifdef __CUDACC__
#define ACCL_HOST_DEVICE __host__ __device__
#else
#define ACCL_HOST_DEVICE
#endif
ACCL_HOST_DEVICE inline bool directSharesSend(DevColl c, int k, int root) {
  return c == DevColl::AllReduce || c == DevColl::Reduce || c == DevColl::ReduceScatter || c == DevColl::AllToAll ||
         ((c == DevColl::Broadcast || c == DevColl::Scatter) && k == root);
}
ACCL_HOST_DEVICE inline bool directSharesRecv(DevColl c, int k, int root) {
  return c == DevColl::AllReduce || c == DevColl::AllGather || c == DevColl::Broadcast || c == DevColl::AllToAll ||
         ((c == DevColl::Reduce || c == DevColl::Gather) && k == root);
}

// Point-to-point: a group's sends and receives of one communicator. Operations
// with the same peer and direction form an entry and run in order; the
// entry's chansPerEntry blocks move their slices (channels) of each operation,
// block k channels k, k + chansPerEntry, ... Copies to self belong to no entry
// (entry -1): every block of the launch copies its share of them.
constexpr int kDevMaxP2pOps = 48;
struct DevP2pOp {
  char* buf;          // send: source; recv: destination
  const char* src;    // self copy: source (buf is the destination)
  size_t bytes;
  DevChan* ch;        // NULL for a self copy
  int32_t peer;
  int32_t isSend;
  int32_t nChannels;  // slices of this operation
  int32_t entry;      // ops of one entry run in the order they are listed
  int32_t direct;     // copied between the buffers, not through slots (DevP2pDirect)
  int32_t pad;
};
// A direct send (ranks of one process on one GPU, larger than the channel's
// slots hold): the slot carries addresses, not bytes. A block runs each of
// its slices of a direct operation in three passes, so that the peer's
// blocks never wait for this block's copying to reach their slice:
//   1. the sender posts every slice's address (tail moves, its size word
//      kDevP2pDirectMark) with its block's load; the receiver answers each
//      with its own address and where the slice splits (replySeq);
//   2. each end copies its part of every slice from the sender's buffer into
//      the receiver's (the receiver the first `mid` bytes), and the sender
//      says when its part is written (doneSeq);
//   3. the receiver releases each slot (head) once the sender's part is
//      written; the sender's kernel waits for that, since its buffer is read
//      until then.
// The split evens out the two blocks' loads: a gather's root, whose few
// blocks per peer each run several slices of its receive besides their share
// of the self copy, leaves its senders the copying (docs/design.md, "Direct
// sends"). The receiver checks the slice's size and the operation's.
// Sequence numbers are the tail value of the post, so a stale slot never
// matches.
constexpr uint32_t kDevP2pDirectMark = 0xffffffffu;
struct DevP2pDirect {
  const char* src;  // sender
  uint64_t bytes;
  uint64_t total;   // the operation's bytes
  uint64_t rounds;  // the sender's block: slices of this operation it runs
  uint64_t extra;   // the sender's block: bytes it copies meanwhile besides them (its share of self copies)
  char pad0[88];
  char* dst;  // receiver
  uint64_t mid;
  uint64_t replySeq;
  char pad1[104];
  uint64_t doneSeq;  // sender
};
struct DevP2pWork {
  DevCtx ctx;
  int32_t nOps, nEntries, chansPerEntry;
  int32_t nChannelsConn;  // channels of every connector (for abort)
  int32_t nBlocks;        // nEntries * chansPerEntry, or the self copies' blocks when there are no entries
  int32_t pad;
  uint64_t selfBytes;     // of every self copy together (a block copies about selfBytes / nBlocks)
  DevP2pOp ops[kDevMaxP2pOps];
};

// A group's sends and receives where every rank of a communicator in this
// process on one GPU sends one buffer to one rank and receives as many bytes
// from one rank, so that the sends form a permutation (sendrecv's ring, in
// place or not): one launch moves rank k's bytes from send[k] to to[k] (its
// receiver's buffer). Each thread reads its 16-byte pack of every send
// buffer before it writes any, so in place needs no copy (coll/dev_coll.cc
// devRunTogether).
struct DevPermWork {
  const char* send[kDevMaxDirect];
  char* to[kDevMaxDirect];
  int32_t n;
  int32_t pad;
  uint64_t bytes;
};

// ncclWaitSignal on device windows (coll/rma_dev.cc): one thread waits until
// each entry's peer raised `need` more signals than this rank consumed, then
// consumes them. `signals` and `consumed` are this rank's (device memory, by
// peer); peers raise signals with atomic adds through their mapping of it.
constexpr int kDevMaxWaitEntries = 32;
struct DevRmaWait {
  DevCtx ctx;
  const uint64_t* signals;
  uint64_t* consumed;
  uint32_t* finished;  // host-mapped: wait kernels that ended (the host watches peers while some run)
  int32_t n;
  int32_t peer[kDevMaxWaitEntries];
  uint64_t need[kDevMaxWaitEntries];
};

}  // namespace accl
