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

#include "base/check.h"
#include "bootstrap/bootstrap.h"
#include "coll/dev_comm.h"
#include "coll/dev_ipc.h"
#include "coll/dev_state.h"
#include "coll/host_direct.h"
#include "coll/reg_table.h"
#include "transport/connection.h"

namespace accl {
namespace {

constexpr int kCap = kRegPlaces;
static_assert(sizeof(cudaIpcMemHandle_t) == kRegHandleBytes, "IPC handles fit the table");

std::string segmentName(const ncclComm* comm) { return shmSegmentName(comm, 0, 0, kTagDevShare); }

// `bytes` at device address `dst` from host memory `src` (NULL: zeroes); a
// WARN says what failed.
bool deviceWrite(ncclComm* comm, void* dst, const void* src, size_t bytes, const char* what) {
  return devWriteSync(comm, dst, src, bytes, what) == ncclSuccess;
}

}  // namespace

class DevShare {
 public:
  explicit DevShare(ncclComm* comm) : comm_(comm) {}
  ~DevShare();

  RegTable* table(int r) const { return static_cast<RegTable*>(map_) + r; }
  // This rank's buffer [p, p + bytes) in an exported allocation: its id + 1
  // and offset there (false: in none).
  bool find(const void* p, size_t bytes, uint32_t* reg, size_t* off);
  // Maps the peers' new registrations and unmaps their dead ones, then copies
  // what this rank has mapped of each peer's into `mapped`.
  void refresh(uint32_t* mapped);
  // This rank's live ids on the device (`id`, or ~0u where none lives).
  bool setLive(int place, uint32_t id);

  ncclComm* comm_;
  DevDirectSlot* mine = nullptr;  // this rank's slot (device memory)
  DevDirectSlot* slots[kDevMaxDirect] = {};  // every rank's, as mapped here
  std::vector<void*> openedSlots;
  void* map_ = nullptr;  // every rank's RegTable
  size_t mapBytes_ = 0;
  bool named_ = false;  // rank 0: the segment's name is still to unlink (a setup that fails on the way)

  // Exports: this rank's registered allocations, by base.
  struct Export {
    size_t bytes;
    uint32_t id;
    int users;  // registrations in this allocation
  };
  std::mutex mu;  // exports and imports (ncclCommRegister may run on any thread)
  std::map<char*, Export> exports;
  uint32_t* liveIds = nullptr;  // device memory, by place: what the kernels check their baked ids against

  // Imports: the peers' registrations mapped here, by peer and place.
  struct Import {
    void* base = nullptr;
    bool mappedHere = false;  // through CUDA IPC (else the peer is in this process)
  };
  char** regBases = nullptr;  // device memory: kDevMaxDirect x kCap, what the kernels read
  std::vector<Import> imports;
  std::vector<RegMirror> mirrors;  // by peer
};

void DevShareDeleter::operator()(DevShare* s) const { delete s; }

DevShare::~DevShare() {
  for (const Import& i : imports)
    if (i.mappedHere) ipcClose(i.base);  // every mapped entry: the mirrors' and their failed opens' are none
  for (void* p : openedSlots) ipcClose(p);
  if (regBases) (void)cudaFree(regBases);
  if (liveIds) (void)cudaFree(liveIds);
  if (mine) (void)cudaFree(mine);
  if (map_) munmap(map_, mapBytes_);
  if (named_) shm_unlink(segmentName(comm_).c_str());
  (void)cudaGetLastError();
}

ncclResult_t devShareSetup(ncclComm* comm, bool want, DevSharePtr* out) {
  const int n = comm->nranks, me = comm->rank;
  DevSharePtr s(new DevShare(comm));
  struct Report {
    char slot[sizeof(cudaIpcMemHandle_t)];
    uint64_t slotAddr;  // for ranks of the same process
    int32_t want;       // ACCL_DIRECT and NCCL_ALGO allow it here
    int32_t ready;      // the slot, its handle and the device tables were made (rank 0: and the segment)
  };
  std::vector<Report> all(n);
  Report& mine = all[me];
  auto make = [&]() -> ncclResult_t {
    void* p = nullptr;
    CUDACHECK(cudaMalloc(&p, sizeof(DevDirectSlot)), "cudaMalloc (direct slot)", comm);
    s->mine = static_cast<DevDirectSlot*>(p);
    mine.slotAddr = reinterpret_cast<uint64_t>(p);
    NCCLCHECK(devWriteSync(comm, p, nullptr, sizeof(DevDirectSlot), "cudaMemset (direct slot)"));
    cudaIpcMemHandle_t h;
    CUDACHECK(cudaIpcGetMemHandle(&h, p), "cudaIpcGetMemHandle (direct slot)", comm);
    memcpy(mine.slot, &h, sizeof h);
    const size_t tableBytes = sizeof(char*) * kDevMaxDirect * kCap, liveBytes = sizeof(uint32_t) * kCap;
    CUDACHECK(cudaMalloc(&p, tableBytes), "cudaMalloc (registration table)", comm);
    s->regBases = static_cast<char**>(p);
    NCCLCHECK(devWriteSync(comm, p, nullptr, tableBytes, "cudaMemset (registration table)"));
    CUDACHECK(cudaMalloc(&p, liveBytes), "cudaMalloc (live registrations)", comm);
    s->liveIds = static_cast<uint32_t*>(p);
    std::vector<uint32_t> none(kCap, ~0u);
    NCCLCHECK(devWriteSync(comm, p, none.data(), liveBytes, "cudaMemcpy (live registrations)"));
    comm->gpuBytes += sizeof(DevDirectSlot) + tableBytes + liveBytes;
    s->mapBytes_ = sizeof(RegTable) * n;
    if (me == 0) {
      NCCLCHECK(shmSegmentCreate(comm, "the registrations' tables", segmentName(comm), s->mapBytes_, &s->map_));
      s->named_ = true;
      memset(s->map_, 0, s->mapBytes_);
    }
    return ncclSuccess;
  };
  mine.want = want;
  mine.ready = want && make() == ncclSuccess;  // else WARNed
  NCCLCHECK(comm->bootstrap->allgather(all.data(), sizeof(Report)));
  // Each rank maps the others' slots (and the segment, made by rank 0).
  int32_t ok = 1;
  for (int q = 0; q < n && ok; ++q) ok = all[q].ready;
  if (ok && me != 0 && shmSegmentOpen(comm, "the registrations' tables", segmentName(comm), s->mapBytes_, &s->map_) != ncclSuccess) ok = 0;
  for (int q = 0; q < n && ok; ++q) {
    if (sameProcess(comm, q)) {
      s->slots[q] = reinterpret_cast<DevDirectSlot*>(all[q].slotAddr);
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
  if (s->named_) shm_unlink(segmentName(comm).c_str());  // every rank opened it (or failed to) by now
  s->named_ = false;
  for (int q = 0; q < n; ++q) {
    if (oks[q]) continue;
    if (me == 0) {
      int off = 0;
      while (off < n && all[off].want) ++off;
      if (off < n)
        INFO(kInit, "%s: no direct collectives: rank %d runs with ACCL_DIRECT=0 or NCCL_ALGO", comm->name.c_str(), off);
      else
        INFO(kInit, "%s: no direct collectives: rank %d could not share its direct slot (its WARN says why)",
             comm->name.c_str(), q);
    }
    return ncclSuccess;
  }
  s->imports.resize(static_cast<size_t>(n) * kCap);
  s->mirrors.resize(n);
  *out = std::move(s);
  return ncclSuccess;
}

bool DevShare::find(const void* p, size_t bytes, uint32_t* reg, size_t* off) {
  char* c = static_cast<char*>(const_cast<void*>(p));
  auto it = exports.upper_bound(c);
  if (!p || it == exports.begin()) return false;
  --it;
  if (c + bytes > it->first + it->second.bytes) return false;
  *reg = it->second.id + 1;
  *off = static_cast<size_t>(c - it->first);
  return true;
}

bool DevShare::setLive(int place, uint32_t id) {
  return deviceWrite(comm_, liveIds + place, &id, sizeof id, "cudaMemcpy (live registrations)");
}

void DevShare::refresh(uint32_t* mapped) {
  const int n = comm_->nranks;
  for (int q = 0; q < n; ++q) {
    mapped[q] = 0;
    if (q == comm_->rank) continue;
    Import* row = imports.data() + static_cast<size_t>(q) * kCap;
    char** bases = regBases + static_cast<size_t>(q) * kCap;
    auto open = [&](int place, uint32_t, const char* handle, uint64_t base) {
      Import im{reinterpret_cast<void*>(base), false};
      if (!sameProcess(comm_, q)) {
        if (ipcOpen(comm_, handle, q, "a collective (a peer's ncclCommRegister'd buffer)", &im.base) != ncclSuccess)
          return false;  // WARNed; this peer's later registrations run on the ring
        im.mappedHere = true;
      }
      char* b = static_cast<char*>(im.base);
      if (!deviceWrite(comm_, bases + place, &b, sizeof b, "cudaMemcpy (registration table)")) {
        if (im.mappedHere) ipcClose(im.base);
        return false;
      }
      row[place] = im;
      return true;
    };
    // The peer waited for its work before it deregistered. If clearing the
    // device entry fails (WARNed), it keeps a stale pointer that no kernel
    // reads: a dead id is never published, and a new entry there rewrites it.
    auto close = [&](int place) {
      char* none = nullptr;
      if (row[place].mappedHere) ipcClose(row[place].base);
      row[place] = Import{};
      (void)deviceWrite(comm_, bases + place, &none, sizeof none, "cudaMemcpy (registration table)");
    };
    mirrors[q].refresh(*table(q), open, close);
    mapped[q] = mirrors[q].watermark();
  }
}

void devSharePrepare(ncclComm* comm, DevShare* share, DevCollWork* w, size_t sendBytes, size_t recvBytes,
                     bool capturing) {
  std::lock_guard<std::mutex> lock(share->mu);
  // The mappings are host work outside the capture: allowed even when the
  // capture is in global mode (as torch's are).
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (capturing) (void)cudaThreadExchangeStreamCaptureMode(&mode);
  share->refresh(w->mapped);
  if (capturing) (void)cudaThreadExchangeStreamCaptureMode(&mode);
  (void)cudaGetLastError();
  for (int q = 0; q < comm->nranks; ++q) w->slots[q] = share->slots[q];
  w->shared = 1;
  w->regBases = share->regBases;
  w->liveIds = share->liveIds;
  w->sendReg = w->recvReg = 0;
  if (w->sendWin < 0) share->find(w->send, sendBytes, &w->sendReg, &w->sendRegOff);
  if (w->recvWin < 0) share->find(w->recv, recvBytes, &w->recvReg, &w->recvRegOff);
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
  cudaIpcMemHandle_t h;
  cudaError_t err = cudaIpcGetMemHandle(&h, base);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    INFO(kColl, "ncclCommRegister (%s, rank %d): the allocation of %p cannot be shared through CUDA IPC (%s); "
         "collectives on it take the ring", comm->name.c_str(), comm->rank, reg->buff, cudaGetErrorString(err));
    return;
  }
  // The kernels see it live before the peers can map it.
  uint32_t id = 0;
  char handle[kRegHandleBytes];
  memcpy(handle, &h, sizeof h);
  if (!regAdd(share->table(comm->rank), handle, reinterpret_cast<uint64_t>(base), &id,
              [&](int place, uint32_t newId) { return share->setLive(place, newId); })) {
    INFO(kColl, "ncclCommRegister (%s, rank %d): %p is not shared (%d registered allocations are already, or the "
         "device table could not be written); collectives on it take the ring", comm->name.c_str(), comm->rank,
         reg->buff, kCap);
    return;
  }
  share->exports[base] = DevShare::Export{bytes, id, 1};
  reg->shared = base;
  INFO(kColl, "ncclCommRegister (%s, rank %d): %p shared with the other processes as registration %u",
       comm->name.c_str(), comm->rank, reg->buff, id);
}

ncclResult_t devShareDeregister(ncclComm* comm, DevShare* share, Registration* reg) {
  if (!reg->shared) return ncclSuccess;
  DevShare::Export gone{};
  {
    std::lock_guard<std::mutex> lock(share->mu);
    auto it = share->exports.find(reg->shared);
    reg->shared = nullptr;
    if (it == share->exports.end() || --it->second.users > 0) return ncclSuccess;
    gone = it->second;
    share->exports.erase(it);  // later calls no longer name it
  }
  // Peers may still read it in this communicator's queued work. If that work
  // failed, the communicator is unusable anyway: the entry dies all the same.
  const ncclResult_t waited = devWait(comm);
  std::lock_guard<std::mutex> lock(share->mu);
  (void)share->setLive(static_cast<int>(gone.id % kCap), ~0u);  // graphs that name it now take the ring
  regKill(share->table(comm->rank), gone.id);
  return waited;
}

void devShareReport(ncclComm* comm, DevShare* share) {
  if (!logEnabled(LogLevel::Info, kColl)) return;
  // The slot's counters, copied on a stream of this rank's own (the kernels
  // that wrote them have ended, or were stopped).
  DevDirectSlot slot{};
  cudaStream_t s = nullptr;
  bool ok = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess;
  ok = ok && cudaMemcpyAsync(&slot, share->mine, sizeof slot, cudaMemcpyDeviceToHost, s) == cudaSuccess;
  ok = ok && cudaStreamSynchronize(s) == cudaSuccess;
  if (s) (void)cudaStreamDestroy(s);
  (void)cudaGetLastError();
  if (ok)
    INFO(kColl, "%s rank %d: %llu collective(s) ran direct, %llu on the ring (ranks in several processes on one GPU)",
         comm->name.c_str(), comm->rank, static_cast<unsigned long long>(slot.directRuns),
         static_cast<unsigned long long>(slot.ringRuns));
}

}  // namespace accl
#endif
