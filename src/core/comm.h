// The communicator. One per rank; created by the init calls, used by every
// collective, torn down by finalize/destroy/abort.
//
// Threads: the owning user thread runs collectives; socket proxy threads move
// data for net connections; ncclCommAbort may come from any thread. abortFlag
// and asyncError are atomics for that reason; everything else is written only
// during init (before the comm is handed out) or teardown (after inFlight == 0).
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/config.h"
#include "core/handles.h"
#include "core/ops.h"
#include "device/host_reduce.h"

namespace accl {

constexpr uint64_t kCommMagic = 0x6c6c6363612d636dull;  // "mc-accll"
constexpr uint64_t kCommDeadMagic = 0x646165642d636d6dull;

// What every rank tells the others at init.
struct PeerInfo {
  int32_t rank;
  int32_t pid;
  uint64_t pidNs;     // its PID namespace (pidNamespace()): pids mean the same only within one
  uint64_t hostHash;
  int32_t cudaDev;
  int32_t deviceMode;
  int32_t smCount;   // device mode: multiprocessors of cudaDev
  uint64_t devKey;   // device mode: hash of cudaDev's UUID (ranks on one GPU share it)
  // Device mode: channels this rank asks for (ACCL_NCHANNELS, ACCL_P2P_NCHANNELS;
  // 0 = automatic). Both ends of a connector slice alike, so all take the fewest.
  int32_t wantChannels, wantP2pChannels;
  // Device mode: the staged chunk this rank asks for (ACCL_STAGE_CHUNK_BYTES;
  // 0 = none). Every rank must chunk a call alike, so all take the smallest.
  int64_t stageChunk;
  // Device mode: 1 where this rank lets device buffers between hosts run the
  // ring in kernels (ACCL_NET_KERNELS); all do only where every rank does.
  int32_t netKernels;
  uint64_t nonce;  // random; rank 0's makes the comm hash unique even for a reused NCCL_COMM_ID
  // Host direct collectives (coll/host_direct.h): this rank runs them (rank 0:
  // and made their slots); its process's random key, equal for ranks of one
  // process, and where in that process a peer reads it to probe cross memory attach.
  int32_t hostDirect;
  uint64_t processKey;
  uint64_t reachProbe;
  // What every rank must use alike (commInit takes what all allow): the
  // algorithms NCCL_ALGO allows (AlgoMask::bits) and the FIFO slot size.
  uint32_t algoBits;
  uint32_t slotBytes;
  uint32_t slotBytesAcross;  // the slot it asks for where the ranks span hosts (slotBytesParam)
  char hostname[64];
};

// The ring the allreduce runs on: order[i] is the rank at ring position i.
struct Ring {
  std::vector<int> order;
  int position = 0;  // this rank's index in order
  int prev = -1, next = -1;
  ConnPtr send, recv;
};

// One binary tree of the double binary tree: this rank's parent and children
// (-1 where absent), and the connections to them, made on first use.
struct Tree {
  int parent = -1;
  int children[2] = {-1, -1};
  Connection* up = nullptr;                 // to the parent
  Connection* fromParent = nullptr;         // from the parent
  Connection* down[2] = {nullptr, nullptr}; // to each child
  Connection* fromChild[2] = {nullptr, nullptr};
};

// An op made by ncclRedOpCreatePreMulSum.
struct UserOp {
  ncclDataType_t type;
  bool deviceScalar;     // read *scalarPtr at each use (ncclScalarDevice)
  const void* scalarPtr;
  Scalar value;          // ncclScalarHostImmediate: copied at creation
};

// A buffer recorded by ncclCommRegister.
struct Registration {
  void* buff;
  size_t size;
  char* shared = nullptr;  // device mode, ranks of several processes on one GPU: the allocation it exported
};

// Connection tags: which logical connection between the same two ranks.
enum ConnTag : int { kTagRing = 0, kTagTree0 = 1, kTagTree1 = 2, kTagP2p = 3, kTagRma = 4,
                     kTagHostDirect = 5,  // names the host direct collectives' slots (coll/host_direct.h)
                     kTagDevShare = 6,    // names the device registrations' tables (coll/dev_share.h)
                     kTagHierLocal = 7, kTagHierRail = 8,  // the hierarchical collectives' rings (within a host; a rail's hosts)
                     kTagDevice = 16, kTagDevRing = 16, kTagDevP2p = 17 };  // >= kTagDevice: device connectors

}  // namespace accl

struct ncclComm {
  uint64_t magic = accl::kCommMagic;
  int rank = -1, nranks = 0, cudaDev = -1;
  int nvmlDev = -1;  // device mode: cudaDev's place in PCI order, NVML's (-1: not known)
  char gpuPci[16] = {};  // device mode: cudaDev's PCI address ("0000:17:00.0"; the topology's nearest NIC)
  bool deviceMode = false;
  int devChannels = 1;  // device mode: channels of every device connector (all ranks agree at setup)
  accl::CommConfig config;
  uint64_t commHash = 0;  // unique per communicator; names shared-memory segments
  std::string name;       // config commName or "comm <hash>"

  std::atomic<uint32_t> abortFlag{0};
  std::atomic<int> asyncError{ncclSuccess};
  std::atomic<int> failedRank{-1};   // the rank whose failure broke this comm, when known
  std::atomic<int> inFlight{0};      // calls currently using the comm (abort waits for them)
  // The user thread that issues this rank's operations (the last one that
  // did, or the one that made the communicator), and the one blocked in an
  // operation on it now (0: none), by pthread_self: a rank waiting for a rank
  // of its own process tells from them whether any thread can still bring
  // that rank to the call (core/self_wait.h).
  std::atomic<unsigned long> driver{pthread_self()};
  std::atomic<unsigned long> caller{0};
  int selfWaitPeer = -1;          // the waiting thread's: which rank it found unreachable,
  uint64_t selfWaitSinceMs = 0;   // and since when (steady clock)
  std::atomic<bool> initDone{false};
  std::atomic<bool> revoked{false};  // ncclCommRevoke: no new operations; shrink, destroy and abort still work
  std::atomic<bool> suspended{false};  // ncclCommSuspend: no new operations until ncclCommResume
  std::atomic<uint64_t> gpuBytes{0};   // device memory this communicator allocated (ncclCommMemStats)
  int shrinkCount = 0;                // ncclCommShrink calls so far (every remaining rank counts alike)
  uint32_t splitCount = 0;            // ncclCommSplit calls so far (every rank counts alike)
  uint32_t growCount = 0;             // ncclCommGrow calls so far (every existing rank counts alike)
  std::thread initThread;            // non-blocking init runs here
  std::atomic<bool> finalized{false};  // ncclCommFinalize was called (a second call is an error, as in NCCL)
  // Who frees the comm while an init job on a caller's thread (a blocking
  // init, or a group's) owns it (api/init_api.cc): kInitNone, kInitRunning,
  // kInitAborted (abort or destroy came meanwhile: the job frees it when it
  // returns), kInitFailed (the job is freeing what it could not finish).
  std::atomic<int> initOwner{0};

  // Made with the communicator (init/comm_alloc.h), never replaced: an abort
  // on another thread may shut it down while the init still sets it up
  // (Bootstrap::shutdownAll).
  accl::BootstrapPtr bootstrap;
  // What commSetError stops in the layers above core (the connections, the
  // direct collectives' slots, waiting kernels), set with the communicator.
  void (*stopLayers)(ncclComm* comm) = nullptr;
  std::vector<accl::PeerInfo> peers;
  accl::Ring ring;
  accl::Tree trees[2];
  bool treesReady = false;
  // Connections other than the ring's, by (peer, tag): trees, point-to-point,
  // one-sided. Guarded by connMu: they are made on first use by the calling
  // thread, the staging proxy or one-sided registration, while commSetError
  // (any thread, e.g. a proxy or the one-sided receiver) walks them.
  std::map<std::pair<int, int>, accl::ConnPtr> sendConns, recvConns;
  std::recursive_mutex connMu;
  std::atomic<int> connWalkers{0};  // forEachConnection walks under way (commTakeConnections waits them out)
  // The point-to-point connections (kTagP2p) by peer (nranks entries, made at
  // init), each set once its connection exists: what runP2p asks for on every
  // call, without connMu (the rank's thread and, between hosts with device
  // buffers, the staging proxy both run it).
  std::unique_ptr<std::atomic<accl::Connection*>[]> p2pSendTo, p2pRecvFrom;
  std::map<int, accl::UserOp> userOps;                // ncclRedOp_t value -> op (ids are unique per process)
  std::set<accl::Registration*> registrations;        // ncclCommRegister handles (freed with the comm)
  uint64_t opCount = 0;
  int nhosts = 1;              // distinct host identities among the ranks
  accl::TopologyPtr topo;      // several hosts: their NICs' rails, the ring's order (topo/topo.h)
  accl::HierPtr hier;          // the hierarchical collectives' rings, from their first call (coll/hier.h)
  accl::NetBackend* net = nullptr;  // the network ncclConfig_t.netName names (null: the process's, netBackend())
  accl::AlgoMask algoMask;     // NCCL_ALGO: what every rank's allows (commInit)
  size_t slotBytes = 0;        // of every FIFO: the smallest any rank asks for (NCCL_BUFFSIZE, ACCL_CHUNKSIZE; between hosts, more by default)
  accl::DevStatePtr dev;       // device mode only
  accl::RmaPtr rma;            // windows and one-sided operations (from the first window)
  // The host copy an in-place all-to-all sends from, kept for the next call:
  // reused while no queued operation still holds it (coll/send_recv_colls.cc).
  std::shared_ptr<void> alltoallStaging;
  size_t alltoallStagingBytes = 0;
  // This rank's "stopped" word in the host direct collectives' slots
  // (coll/host_direct.h), once they exist: abort and errors raise it from any thread.
  std::atomic<std::atomic<int32_t>*> directStopWord{nullptr};
  // Ranks of this host in other PID namespaces (transport/peer_life.h): the lock
  // this rank holds while it lives, and the peers' files, by rank (-1: not watched).
  int lifeOwnFd = -1;
  std::vector<int> lifeFds;
  // Host buffers: a send of at least this many bytes to a rank that reaches
  // this one's memory is pulled by the receiver (coll/p2p.cc); -1: none.
  int64_t p2pPullMinBytes = -1;
  // By rank: a rank of this host in another process that pulled sends reach
  // both ways (coll/p2p_reach.h); empty or 0 elsewhere.
  std::vector<uint8_t> p2pReach;
  bool p2pPullAnnounced = false;  // the first pulled send's INFO line is out
  accl::HostDirectPtr hostDirect;  // host mode, every rank on one host: the direct collectives' slots (after directStopWord, which its destructor clears)
};

namespace accl {

// What rank `index` sent of itself at init holds values this build can use
// (a peer of another build, or not ACCL, could send anything); else false,
// with the first bad field in `why`. Terminates the hostname.
bool peerInfoValid(PeerInfo& p, int index, std::string* why);

// The comm handle is one we made and is still alive (not destroyed).
bool commValid(const ncclComm* comm);
// A pin on a live communicator: the calling thread's slot naming it, or
// (where that slot names another communicator, or the thread is exiting) a
// count in its inFlight; or neither, where the thread pins it already.
// commFree waits for both.
struct CommPin {
  bool live = false;
  std::atomic<const ncclComm*>* slot = nullptr;
  ncclComm* counted = nullptr;
};
// commValid, and if so pins the communicator in the same step (a destroy
// unregisters it before it waits for pins, so it either sees this pin or this
// call sees it gone). core/comm_registry.cc says how.
CommPin commPin(const ncclComm* comm);
// Some thread holds a pin on `comm` (commFree waits until none does).
bool commPinned(const ncclComm* comm);
// Rank k of `comm`'s communicator, where a live communicator of this process
// is that rank: its driver and caller (above). False where none is.
bool siblingThreads(const ncclComm* comm, int k, unsigned long* driver, unsigned long* caller);
// For work queued on a communicator that is gone when it runs (another thread
// destroyed or aborted it first): the WARN and the error.
ncclResult_t commGone(const ncclComm* comm, const char* what);
void registerComm(ncclComm* comm);
void unregisterComm(ncclComm* comm);

// Marks the communicator failed (first error wins) and wakes every waiter:
// sets abort on all FIFOs so peers stop waiting too.
void commSetError(ncclComm* comm, ncclResult_t err);
// Records `rank` as the rank whose failure broke the communicator, unless a
// cause is already known: the first finding names the root cause, and a later
// one (a peer that stopped because of it) must not replace it.
inline void commNoteFailedRank(ncclComm* comm, int rank) {
  int none = -1;
  comm->failedRank.compare_exchange_strong(none, rank);
}
// What a wait of operation `op` returns once the communicator's abort flag is
// up (a WARN says so): the communicator's error if it failed, else
// ncclInvalidUsage (ncclCommAbort).
ncclResult_t commAbortedResult(ncclComm* comm, const char* op);
// This host as the ranks tell hosts apart: NCCL_HOSTID, else the hostname,
// the boot id and the /dev/shm it sees (containers with a private /dev/shm
// share no memory segments, so they are hosts of their own).
uint64_t hostHash();
// This process's PID namespace (the inode of /proc/self/ns/pid; 0: unknown,
// which matches only another unknown: pids are then trusted, as before).
uint64_t pidNamespace();
// Rank k's pid as this process can use it (liveness checks, /proc/<pid>/...):
// 0 where k is on another host or in another PID namespace (a container of
// its own), where that number names another process or none.
pid_t localPid(const ncclComm* comm, int k);
bool processAlive(pid_t pid);  // true for pid 0 (not checked)
// Ranks k and this one share an address space: the same random process key
// (PeerInfo::processKey) and pid. Never by pid alone: containers repeat pids.
bool sameProcess(const ncclComm* comm, int k);

// Keeps a communicator allocated for the duration of an API call: commFree
// waits for inFlight to fall and for pins to go.
class CommUse {
 public:
  // A communicator this thread keeps alive already (its init, its teardown,
  // the work a call runs): counted in inFlight, which a destroy from another
  // thread reads as "a call is inside" and aborts.
  explicit CommUse(ncclComm* c) : counted_(c), live_(true) { c->inFlight.fetch_add(1); }
  // An API call's entry, on a handle from the user: pins it if it is live
  // (commPin), so that an abort or destroy on another thread cannot free it
  // between the call's checks and its use; else pins nothing, and the checks
  // say what is wrong with the handle.
  static CommUse ifLive(const ncclComm* c) { return CommUse(commPin(c)); }
  ~CommUse() {
    if (slot_) slot_->store(nullptr, std::memory_order_release);
    if (counted_) counted_->inFlight.fetch_sub(1);
  }
  explicit operator bool() const { return live_; }
  CommUse(const CommUse&) = delete;
  CommUse& operator=(const CommUse&) = delete;

 private:
  explicit CommUse(const CommPin& p) : slot_(p.slot), counted_(p.counted), live_(p.live) {}
  std::atomic<const ncclComm*>* slot_ = nullptr;
  ncclComm* counted_ = nullptr;
  bool live_ = false;
};

}  // namespace accl
