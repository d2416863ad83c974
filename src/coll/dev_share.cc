// Slots and registrations shared by ranks of several processes on one GPU
// (coll/dev_share.h says how).
#ifdef ACCL_HAVE_DEVICE_PATH
#include "coll/dev_share.h"

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "coll/dev_ipc.h"
#include "coll/dev_state.h"
#include "transport/connection.h"

namespace accl {
namespace {

constexpr int kCap = kDevMaxRegistrations;

// One exported allocation in a rank's table. `id` is written last (and
// checked again after the handle is read), so a reader never takes a handle
// that is being replaced: an entry's place is reused, under a new id, only
// once its registration is dead.
struct Entry {
  std::atomic<uint32_t> id;
  std::atomic<uint32_t> live;
  char handle[sizeof(cudaIpcMemHandle_t)];
};
struct Table {
  std::atomic<uint32_t> count;   // ids so far (the next one)
  std::atomic<uint32_t> deaths;  // registrations that died so far
  char pad[56];
  Entry e[kCap];
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "atomics in shared memory");

std::string segmentName(const ncclComm* comm) { return shmSegmentName(comm, 0, 0, kTagDevShare); }

}  // namespace

class DevShare {
 public:
  explicit DevShare(ncclComm* comm) : comm_(comm) {}
  ~DevShare();

  Table* table(int r) const { return static_cast<Table*>(map_) + r; }
  // This rank's buffer [p, p + bytes) in an exported allocation: its id + 1
  // and offset there (false: in none).
  bool find(const void* p, size_t bytes, uint32_t* reg, size_t* off);
  // Maps the peers' new registrations and unmaps their dead ones.
  ncclResult_t refresh();

  ncclComm* comm_;
  DevDirectSlot* mine = nullptr;  // this rank's slot (device memory)
  DevDirectSlot* slots[kDevMaxDirect] = {};  // every rank's, as mapped here
  std::vector<void*> openedSlots;
  void* map_ = nullptr;  // every rank's Table
  size_t mapBytes_ = 0;

  // Exports: this rank's registered allocations, by base.
  struct Export {
    size_t bytes;
    uint32_t id;
    int users;  // registrations in this allocation
  };
  std::mutex mu;  // exports and imports (ncclCommRegister may run on any thread)
  std::map<char*, Export> exports;

  // Imports: the peers' registrations mapped here, by peer and place.
  struct Import {
    uint32_t id = 0;
    void* base = nullptr;
  };
  char** regBases = nullptr;  // device memory: kDevMaxDirect x kCap, what the kernels read
  std::vector<Import> imports;
  std::vector<uint32_t> scanned;     // by peer: ids below were looked at (the published `mapped`)
  std::vector<uint32_t> deathsSeen;  // by peer
  std::vector<bool> stuck;           // by peer: a mapping failed (WARNed); later ids stay unmapped
};

void DevShareDeleter::operator()(DevShare* s) const { delete s; }

DevShare::~DevShare() {
  for (const Import& i : imports)
    if (i.base) ipcClose(i.base);
  for (void* p : openedSlots) ipcClose(p);
  if (regBases) (void)cudaFree(regBases);
  if (mine) (void)cudaFree(mine);
  if (map_) munmap(map_, mapBytes_);
  (void)cudaGetLastError();
}

ncclResult_t devShareSetup(ncclComm* comm, DevSharePtr* out) {
  const int n = comm->nranks, me = comm->rank;
  DevSharePtr s(new DevShare(comm));
  struct Report {
    char slot[sizeof(cudaIpcMemHandle_t)];
    int32_t ready;  // the slot, its handle and the device table were made (rank 0: and the segment)
  };
  std::vector<Report> all(n);
  Report& mine = all[me];
  auto make = [&]() -> ncclResult_t {
    void* p = nullptr;
    CUDACHECK(cudaMalloc(&p, sizeof(DevDirectSlot)), "cudaMalloc (direct slot)", comm);
    s->mine = static_cast<DevDirectSlot*>(p);
    NCCLCHECK(devWriteSync(comm, p, nullptr, sizeof(DevDirectSlot), "cudaMemset (direct slot)"));
    cudaIpcMemHandle_t h;
    CUDACHECK(cudaIpcGetMemHandle(&h, p), "cudaIpcGetMemHandle (direct slot)", comm);
    memcpy(mine.slot, &h, sizeof h);
    const size_t tableBytes = sizeof(char*) * kDevMaxDirect * kCap;
    CUDACHECK(cudaMalloc(&p, tableBytes), "cudaMalloc (registration table)", comm);
    s->regBases = static_cast<char**>(p);
    NCCLCHECK(devWriteSync(comm, p, nullptr, tableBytes, "cudaMemset (registration table)"));
    comm->gpuBytes += sizeof(DevDirectSlot) + tableBytes;
    s->mapBytes_ = sizeof(Table) * n;
    if (me == 0) {
      NCCLCHECK(shmSegmentCreate(comm, 0, segmentName(comm), s->mapBytes_, &s->map_));
      memset(s->map_, 0, s->mapBytes_);
    }
    return ncclSuccess;
  };
  mine.ready = make() == ncclSuccess;  // else WARNed
  NCCLCHECK(comm->bootstrap->allgather(all.data(), sizeof(Report)));
  // Each rank maps the others' slots (and the segment, made by rank 0).
  int32_t ok = mine.ready;
  for (int q = 0; q < n && ok; ++q) ok = all[q].ready;
  if (ok && me != 0 && shmSegmentOpen(comm, 0, segmentName(comm), s->mapBytes_, &s->map_) != ncclSuccess) ok = 0;
  for (int q = 0; q < n && ok; ++q) {
    if (q == me) {
      s->slots[q] = s->mine;
      continue;
    }
    void* p = nullptr;
    if (ipcOpen(comm, all[q].slot, q, "init (direct slots)", &p) != ncclSuccess) {
      ok = 0;
      break;
    }
    s->openedSlots.push_back(p);
    s->slots[q] = static_cast<DevDirectSlot*>(p);
  }
  std::vector<int32_t> oks(n, 0);
  oks[me] = ok;
  NCCLCHECK(comm->bootstrap->allgather(oks.data(), sizeof(int32_t)));
  if (me == 0 && s->map_) shm_unlink(segmentName(comm).c_str());  // every rank opened it (or failed to) by now
  for (int q = 0; q < n; ++q) {
    if (oks[q]) continue;
    if (me == 0)
      INFO(kInit, "%s: no direct collectives: rank %d could not share its direct slot (its WARN says why)",
           comm->name.c_str(), q);
    return ncclSuccess;
  }
  s->imports.resize(static_cast<size_t>(n) * kCap);
  s->scanned.assign(n, 0);
  s->deathsSeen.assign(n, 0);
  s->stuck.assign(n, false);
  *out = std::move(s);
  return ncclSuccess;
}

bool DevShare::find(const void* p, size_t bytes, uint32_t* reg, size_t* off) {
  std::lock_guard<std::mutex> lock(mu);
  char* c = static_cast<char*>(const_cast<void*>(p));
  auto it = exports.upper_bound(c);
  if (!p || it == exports.begin()) return false;
  --it;
  if (c + bytes > it->first + it->second.bytes) return false;
  *reg = it->second.id + 1;
  *off = static_cast<size_t>(c - it->first);
  return true;
}

ncclResult_t DevShare::refresh() {
  std::lock_guard<std::mutex> lock(mu);
  const int n = comm_->nranks;
  for (int q = 0; q < n; ++q) {
    if (q == comm_->rank) continue;
    Table* t = table(q);
    Import* row = imports.data() + static_cast<size_t>(q) * kCap;
    // Dead registrations first: their places may be reused below.
    const uint32_t deaths = t->deaths.load(std::memory_order_acquire);
    if (deaths != deathsSeen[q]) {
      deathsSeen[q] = deaths;
      for (int i = 0; i < kCap; ++i) {
        Import& im = row[i];
        if (!im.base) continue;
        const Entry& e = t->e[i];
        if (e.id.load(std::memory_order_acquire) == im.id && e.live.load(std::memory_order_acquire)) continue;
        ipcClose(im.base);  // the peer waited for its work before it deregistered
        im = Import{};
      }
    }
    const uint32_t count = t->count.load(std::memory_order_acquire);
    for (uint32_t id = scanned[q]; id < count && !stuck[q]; ++id) {
      const int i = static_cast<int>(id % kCap);
      const Entry& e = t->e[i];
      char handle[sizeof(cudaIpcMemHandle_t)];
      if (e.id.load(std::memory_order_acquire) != id) {  // replaced: dead before this rank saw it
        scanned[q] = id + 1;
        continue;
      }
      memcpy(handle, e.handle, sizeof handle);
      const bool live = e.live.load(std::memory_order_acquire);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (e.id.load(std::memory_order_relaxed) != id || !live) {
        scanned[q] = id + 1;
        continue;
      }
      Import& im = row[i];
      if (im.base) ipcClose(im.base);  // an older registration at this place, dead
      im = Import{};
      void* base = nullptr;
      if (ipcOpen(comm_, handle, q, "a collective (a peer's ncclCommRegister'd buffer)", &base) != ncclSuccess) {
        stuck[q] = true;  // WARNed; this peer's later registrations run on the ring
        break;
      }
      im = Import{id, base};
      char* b = static_cast<char*>(base);
      NCCLCHECK(devWriteSync(comm_, regBases + static_cast<size_t>(q) * kCap + i, &b, sizeof b,
                             "cudaMemcpy (registration table)"));
      scanned[q] = id + 1;
    }
  }
  return ncclSuccess;
}

ncclResult_t devSharePrepare(ncclComm* comm, DevShare* share, DevCollWork* w, size_t sendBytes, size_t recvBytes) {
  NCCLCHECK(share->refresh());
  const int n = comm->nranks;
  for (int q = 0; q < n; ++q) {
    w->slots[q] = share->slots[q];
    w->mapped[q] = q == comm->rank ? 0 : share->scanned[q];
  }
  w->shared = 1;
  w->regBases = share->regBases;
  w->sendReg = w->recvReg = 0;
  if (w->sendWin < 0 && share->find(w->send, sendBytes, &w->sendReg, &w->sendRegOff)) {}
  if (w->recvWin < 0 && share->find(w->recv, recvBytes, &w->recvReg, &w->recvRegOff)) {}
  return ncclSuccess;
}

void devShareRegister(ncclComm* comm, DevShare* share, Registration* reg) {
  char* base = nullptr;
  size_t bytes = 0;
  if (!reg->size || !allocationRange(reg->buff, &base, &bytes)) return;
  std::lock_guard<std::mutex> lock(share->mu);
  auto it = share->exports.find(base);
  if (it != share->exports.end()) {
    ++it->second.users;
    reg->shared = base;
    return;
  }
  Table* t = share->table(comm->rank);
  const uint32_t id = t->count.load(std::memory_order_relaxed);
  Entry& e = t->e[id % kCap];
  if (e.live.load(std::memory_order_relaxed)) {  // its place is taken: kCap live registrations
    INFO(kColl, "ncclCommRegister (%s, rank %d): %d registered allocations are shared already; collectives on "
         "%p take the ring", comm->name.c_str(), comm->rank, kCap, reg->buff);
    return;
  }
  cudaIpcMemHandle_t h;
  cudaError_t err = cudaIpcGetMemHandle(&h, base);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    INFO(kColl, "ncclCommRegister (%s, rank %d): the allocation of %p cannot be shared through CUDA IPC (%s); "
         "collectives on it take the ring", comm->name.c_str(), comm->rank, reg->buff, cudaGetErrorString(err));
    return;
  }
  e.id.store(~0u, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  memcpy(e.handle, &h, sizeof h);
  e.live.store(1, std::memory_order_relaxed);
  e.id.store(id, std::memory_order_release);
  t->count.store(id + 1, std::memory_order_release);
  share->exports[base] = DevShare::Export{bytes, id, 1};
  reg->shared = base;
  INFO(kColl, "ncclCommRegister (%s, rank %d): %p shared with the other processes as registration %u",
       comm->name.c_str(), comm->rank, reg->buff, id);
}

ncclResult_t devShareDeregister(ncclComm* comm, DevShare* share, Registration* reg) {
  if (!reg->shared) return ncclSuccess;
  // Peers may still read it in this communicator's queued work. If that work
  // failed, the communicator is unusable anyway: the entry dies all the same.
  const ncclResult_t waited = devWait(comm);
  std::lock_guard<std::mutex> lock(share->mu);
  auto it = share->exports.find(reg->shared);
  reg->shared = nullptr;
  if (it == share->exports.end() || --it->second.users > 0) return waited;
  Table* t = share->table(comm->rank);
  t->e[it->second.id % kCap].live.store(0, std::memory_order_release);
  t->deaths.fetch_add(1, std::memory_order_acq_rel);
  share->exports.erase(it);
  return waited;
}

void devShareReport(ncclComm* comm, DevShare*) {
  const DevStatus* s = comm->dev->status;
  INFO(kColl, "%s rank %d: %llu collective(s) ran direct, %llu on the ring (ranks in several processes on one GPU)",
       comm->name.c_str(), comm->rank, static_cast<unsigned long long>(s->directRuns),
       static_cast<unsigned long long>(s->ringRuns));
}

}  // namespace accl
#endif
