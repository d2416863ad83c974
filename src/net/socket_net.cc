// ACCL's TCP backend ("Socket"): every interface NCCL_SOCKET_IFNAME selects
// is a device, and up to 16 of them (4 where IPv6) can be merged into one
// (makeVDevice, as NCCL merges the ports of a NIC). A connection is several TCP sockets
// ("lanes", NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD, else one per NIC),
// lane j leaving from the j-th NIC of its device (bound, so that the kernel
// does not send every lane out of one interface) to the peer's j-th NIC;
// net/socket_stream.h moves messages over them. Each lane proves the
// communicator's secret before it is taken: the listener sends it a random
// challenge, and the sender answers with an HMAC of the handle's nonce, that
// challenge and which lane of which connection it is, so that a stranger
// who reads the handle, or an answer on the wire, still cannot connect.
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/debug.h"
#include "base/param.h"
#include "base/sha256.h"
#include "base/wait.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "net/net.h"
#include "net/socket_stream.h"
#include "plugin/nccl_net.h"

namespace accl {
namespace {

constexpr uint32_t kMagic = 0x32746e61;  // "ant2": handles of 16 IPv4 or 4 IPv6 addresses
constexpr char kLabel[] = "ACCL net connection";
constexpr size_t kNonceBytes = 16;
constexpr size_t kConnIdBytes = 8;
// The NICs one device may merge: as many as the handle carries addresses of
// (NCCL's NCCL_NET_MAX_DEVS_PER_NIC is 4; an HPN host has 8 NICs of 2 ports).
constexpr int kMaxV4Nics = 16;
constexpr int kMaxV6Nics = 4;
constexpr int kMaxLanes = 64;      // NCCL's most sockets per connection
constexpr size_t kMaxPending = 2 * kMaxLanes;  // lanes being accepted whose proof has not come in full
constexpr int kPendingGraceMs = 100;  // past this, a silent pending lane may be dropped for a newer one

// Addresses as the handle carries them (port in network order).
struct V4Addr {
  uint8_t ip[4];
  uint8_t port[2];
};
struct V6Addr {
  uint8_t ip[16];
  uint32_t scope;  // the interface of a link-local address
  uint8_t port[2];
  uint8_t pad[2];
};

// The handle, as it travels: the listener's nonce and where to connect, one
// address per NIC of its device, all of one family.
struct Handle {
  uint32_t magic;
  uint8_t nics;
  uint8_t v6;  // the addresses are IPv6 ones
  uint8_t pad[2];
  uint8_t nonce[kNonceBytes];
  union {
    V4Addr v4[kMaxV4Nics];
    V6Addr v6[kMaxV6Nics];
  } addr;
};
static_assert(sizeof(Handle) <= kNetHandleBytes, "a handle is at most NCCL_NET_HANDLE_MAXSIZE bytes");

// Address i of the handle into h (false: no room, or another family than those before).
bool putAddr(Handle* h, const SockAddr& a) {
  const bool v6 = a.sa.sa_family == AF_INET6;
  if (h->nics > 0 && (h->v6 != 0) != v6) return false;
  if (h->nics >= (v6 ? kMaxV6Nics : kMaxV4Nics)) return false;
  h->v6 = v6;
  if (v6) {
    V6Addr& w = h->addr.v6[h->nics];
    memcpy(w.ip, &a.sin6.sin6_addr, 16);
    w.scope = a.sin6.sin6_scope_id;
    memcpy(w.port, &a.sin6.sin6_port, 2);
  } else {
    V4Addr& w = h->addr.v4[h->nics];
    memcpy(w.ip, &a.sin.sin_addr, 4);
    memcpy(w.port, &a.sin.sin_port, 2);
  }
  ++h->nics;
  return true;
}

SockAddr getAddr(const Handle& h, int i) {
  SockAddr a{};
  if (h.v6) {
    const V6Addr& w = h.addr.v6[i];
    a.sin6.sin6_family = AF_INET6;
    memcpy(&a.sin6.sin6_addr, w.ip, 16);
    a.sin6.sin6_scope_id = w.scope;
    memcpy(&a.sin6.sin6_port, w.port, 2);
  } else {
    const V4Addr& w = h.addr.v4[i];
    a.sin.sin_family = AF_INET;
    memcpy(&a.sin.sin_addr, w.ip, 4);
    memcpy(&a.sin.sin_port, w.port, 2);
  }
  return a;
}

// A lane's first bytes: which lane of which connection, and the proof.
struct Proof {
  uint32_t magic;
  uint16_t lane;
  uint16_t lanes;
  uint8_t connId[kConnIdBytes];
  uint8_t mac[kSha256Bytes];
};

// HMAC-SHA256(secret, label | nonce | challenge | connId | lane | lanes):
// bound to this listener, this lane and this one TCP connection, so that it
// proves nothing anywhere else.
void sign(const uint8_t* secret, const uint8_t* nonce, const uint8_t* challenge, Proof* p) {
  uint8_t msg[sizeof(kLabel) + 2 * kNonceBytes + kConnIdBytes + 4];
  uint8_t* m = msg;
  memcpy(m, kLabel, sizeof(kLabel));
  memcpy(m += sizeof(kLabel), nonce, kNonceBytes);
  memcpy(m += kNonceBytes, challenge, kNonceBytes);
  memcpy(m += kNonceBytes, p->connId, kConnIdBytes);
  memcpy(m += kConnIdBytes, &p->lane, 2);
  memcpy(m + 2, &p->lanes, 2);
  hmacSha256(secret, kSecretBytes, msg, sizeof(msg), p->mac);
}

// One lane of a connection being made (the sender's side).
struct LaneConnecting {
  int fd = -1;
  SockAddr to{};
  uint8_t challenge[kNonceBytes];
  size_t got = 0;   // of the challenge
  Proof proof{};
  size_t sent = 0;  // of the proof
};

// A sender's connection being made (connect's progress).
struct Connecting {
  std::vector<LaneConnecting> lanes;
  bool severalNics = false;  // the lanes leave from several NICs: the stream may fail over
  std::vector<bool> standby;  // by lane: its NIC stands by (failover only)
  ~Connecting() {
    for (LaneConnecting& l : lanes)
      if (l.fd >= 0) close(l.fd);
  }
};

// A lane being accepted: challenged, its proof coming.
struct Pending {
  int fd;
  uint64_t sinceMs;
  uint8_t challenge[kNonceBytes];
  size_t got = 0;
  Proof proof{};
};

// The lanes of one connection that have proved themselves, until all are there.
struct Arriving {
  std::vector<int> fds;  // by lane (-1: not yet)
  int count = 0;
};

struct Listen {
  std::vector<int> fds;  // one per NIC of the device
  uint8_t nonce[kNonceBytes];
  uint8_t secret[kSecretBytes];
  std::vector<Pending> pending;
  std::map<std::vector<uint8_t>, Arriving> arriving;  // by connection id
  ~Listen() {
    for (Pending& p : pending) close(p.fd);
    for (auto& a : arriving)
      for (int fd : a.second.fds)
        if (fd >= 0) close(fd);
    for (int fd : fds) close(fd);
  }
};

void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// Mbps from /sys/class/net/<if>/speed (0 where unknown, as for a veth without a rate).
int linkSpeed(const std::string& ifname) {
  std::ifstream f("/sys/class/net/" + ifname + "/speed");
  int mbps = 0;
  return (f >> mbps) && mbps > 0 ? mbps : 0;
}

// Helper threads per connection: NCCL_SOCKET_NTHREADS (NCCL's range 1-16;
// unset or 1: none, the thread that drives the connection moves its
// sockets, the proxy or the rank waiting on it).
int helpersFor() {
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(paramInt(Param::SocketNthreads), 1), 16));
}

// Lanes per connection: NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD where
// either is set (NCCL's ranges: 1-16, 1-64, at most 64 in all), else one per
// NIC of the device, which the measurements found enough to fill each
// (docs/perf.md).
int lanesFor(int nics) {
  const int64_t threads = paramInt(Param::SocketNthreads), socks = paramInt(Param::NsocksPerthread);
  if (threads <= 0 && socks <= 0) return nics;
  const int64_t t = helpersFor();
  const int64_t k = std::min<int64_t>(std::max<int64_t>(socks, 1), 64);
  static std::once_flag said;
  std::call_once(said, [&] {
    if (t != std::max<int64_t>(threads, 1) || k != std::max<int64_t>(socks, 1) || t * k > kMaxLanes)
      WARN("NCCL_SOCKET_NTHREADS=%lld x NCCL_NSOCKS_PERTHREAD=%lld: threads 1-16, sockets per thread 1-64, at most "
           "%d sockets in all; using %lld", static_cast<long long>(threads), static_cast<long long>(socks), kMaxLanes,
           static_cast<long long>(std::min<int64_t>(t * k, kMaxLanes)));
    INFO(kInit | kNet, "NET/Socket: %lld socket(s) per connection, moved by %s",
         static_cast<long long>(std::min<int64_t>(t * k, kMaxLanes)),
         t > 1 ? (std::to_string(t) + " helper threads").c_str() : "the thread that drives it");
  });
  return static_cast<int>(std::min<int64_t>(t * k, kMaxLanes));
}

class SocketNet final : public NetBackend {
 public:
  const char* name() const override { return "Socket"; }
  int version() const override { return 0; }

  int devices() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!probed_) {
      probed_ = true;
      std::vector<NetIf> all;
      if (chooseInterfaces(nullptr, &all) != ncclSuccess) all.clear();  // it WARNed
      for (const NetIf& i : all)  // one device per interface: its first address (IPv4 before IPv6)
        if (std::none_of(ifs_.begin(), ifs_.end(), [&](const NetIf& d) { return d.name == i.name; }))
          ifs_.push_back(i);
      for (const NetIf& i : ifs_) INFO(kNet, "NET/Socket: device %zu is %s (%s)", &i - ifs_.data(), i.name.c_str(),
                                       addrToString(i.addr).c_str());
    }
    return static_cast<int>(ifs_.size());
  }

  // 16 where every interface is IPv4 (their addresses fit the handle), else 4.
  int maxVDeviceNics() const override {
    const_cast<SocketNet*>(this)->devices();  // the interfaces, probed once
    return std::all_of(ifs_.begin(), ifs_.end(), [](const NetIf& i) { return i.addr.sa.sa_family == AF_INET; })
               ? kMaxV4Nics
               : kMaxV6Nics;
  }
  ncclResult_t makeVDevice(const int* devs, int n, int* vdev) override {
    return makeVDeviceWithStandby(devs, n, n, vdev);
  }
  ncclResult_t makeVDeviceWithStandby(const int* devs, int n, int active, int* vdev) override {
    const int phys = devices();
    if (active < 1 || active > n) return ncclInvalidArgument;
    if (n < 1 || n > maxVDeviceNics()) {
      WARN("NET/Socket: a merged device has 1 to %d devices here (16 IPv4 interfaces, or 4 where any is IPv6), not %d",
           maxVDeviceNics(), n);
      return ncclInvalidArgument;
    }
    std::vector<int> nics(devs, devs + n);
    for (int i = 0; i < n; ++i)
      if (devs[i] < 0 || devs[i] >= phys || std::count(devs, devs + n, devs[i]) > 1) {
        WARN("NET/Socket: cannot merge device %d (%d device(s), each at most once)", devs[i], phys);
        return ncclInvalidArgument;
      }
    for (int i = 1; i < n; ++i)  // one handle carries addresses of one family: the caller takes one device
      if (ifs_[devs[i]].addr.sa.sa_family != ifs_[devs[0]].addr.sa.sa_family) return ncclInvalidUsage;
    std::lock_guard<std::mutex> lock(mu_);
    const Merged m{nics, active};
    auto it = std::find(merged_.begin(), merged_.end(), m);
    if (it == merged_.end()) it = merged_.insert(merged_.end(), m);
    *vdev = phys + static_cast<int>(it - merged_.begin());
    return ncclSuccess;
  }

  ncclResult_t properties(int dev, NetDeviceProps* out) override {
    std::vector<int> nics;
    if (!nicsOf(dev, &nics, nullptr, true)) return ncclInvalidArgument;
    *out = NetDeviceProps();
    for (int i : nics) {
      const NetIf& f = ifs_[i];
      out->name += (out->name.empty() ? "" : "+") + f.name;
      out->speedMbps += linkSpeed(f.name);
    }
    char path[PATH_MAX];
    if (nics.size() == 1 && realpath(("/sys/class/net/" + ifs_[nics[0]].name + "/device").c_str(), path))
      out->pciPath = path;
    if (nics.size() == 1) out->subnet = subnetOf(ifs_[nics[0]]);
    out->guid = static_cast<uint64_t>(dev);
    out->ptrSupport = NCCL_PTR_HOST;
    out->maxComms = 65536;
    out->maxRecvs = 1;
    return ncclSuccess;
  }

  ncclResult_t listen(int dev, const uint8_t* secret, void* handle, void** listenComm) override {
    *listenComm = nullptr;
    std::vector<int> nics;
    if (!nicsOf(dev, &nics)) return ncclInvalidArgument;
    auto* h = static_cast<Handle*>(handle);
    memset(h, 0, kNetHandleBytes);
    std::unique_ptr<Listen> l(new Listen());
    for (int i : nics) {
      int fd = -1;
      SockAddr bound{};
      NCCLCHECK(socketListen(ifs_[i].addr, &fd, &bound));
      l->fds.push_back(fd);
      tune(fd);
      if (!putAddr(h, bound)) {
        WARN("NET/Socket: device %d's interfaces (%s among them) do not fit one handle: at most %d IPv4 or %d "
             "IPv6 addresses, of one family", dev, ifs_[i].name.c_str(), kMaxV4Nics, kMaxV6Nics);
        return ncclInvalidArgument;
      }
    }
    if (randomBytes(l->nonce, kNonceBytes) != ncclSuccess) return ncclSystemError;
    memcpy(l->secret, secret, kSecretBytes);
    h->magic = kMagic;
    memcpy(h->nonce, l->nonce, kNonceBytes);
    *listenComm = l.release();
    return ncclSuccess;
  }

  ncclResult_t connect(int dev, const uint8_t* secret, void* handle, void** progress, void** sendComm) override {
    *sendComm = nullptr;
    const auto* h = static_cast<const Handle*>(handle);
    auto* c = static_cast<Connecting*>(*progress);
    if (!c) {
      if (h->magic != kMagic || h->nics < 1 || h->nics > (h->v6 ? kMaxV6Nics : kMaxV4Nics)) {
        WARN("NET/Socket: the handle to connect to is not one of ACCL's socket backend (magic 0x%x)", h->magic);
        return ncclInvalidArgument;
      }
      std::vector<int> nics;
      int active = 0;
      if (!nicsOf(dev, &nics, &active)) return ncclInvalidArgument;
      *progress = c = new Connecting();
      NCCLCHECK(startLanes(nics, active, *h, c));
    }
    bool all = true;
    for (LaneConnecting& l : c->lanes) {
      bool done = false;
      NCCLCHECK(advance(secret, *h, &l, &done));
      all = all && done;
    }
    if (!all) return ncclSuccess;
    std::vector<int> fds;
    for (LaneConnecting& l : c->lanes) {
      tune(l.fd);
      fds.push_back(l.fd);
      l.fd = -1;
    }
    const bool failover = c->severalNics;
    const std::vector<bool> standby = c->standby;
    delete c;
    *progress = nullptr;
    std::unique_ptr<SocketStream> stream(new SocketStream(std::move(fds), true, failover, standby));
    NCCLCHECK(stream->startHelpers(helpersFor()));
    *sendComm = stream.release();
    return ncclSuccess;
  }
  void cancelConnect(void* progress) override { delete static_cast<Connecting*>(progress); }

  ncclResult_t accept(void* listenComm, void** recvComm) override {
    *recvComm = nullptr;
    Listen& l = *static_cast<Listen*>(listenComm);
    takeBacklog(&l);
    for (size_t i = 0; i < l.pending.size();) {
      Pending& p = l.pending[i];
      const ssize_t k = recv(p.fd, reinterpret_cast<char*>(&p.proof) + p.got, sizeof(p.proof) - p.got, MSG_DONTWAIT);
      if (k < 0 && socketWouldBlock()) {
        ++i;
        continue;
      }
      if (k > 0) p.got += static_cast<size_t>(k);
      if (k > 0 && p.got < sizeof(p.proof)) continue;
      Proof want = p.proof;
      sign(l.secret, l.nonce, p.challenge, &want);
      const Proof got = p.proof;  // p goes below
      const bool ok = k > 0 && got.magic == kMagic && secretEqual(got.mac, want.mac) && got.lanes >= 1 &&
                      got.lanes <= kMaxLanes && got.lane < got.lanes;
      const int fd = p.fd;
      l.pending.erase(l.pending.begin() + static_cast<long>(i));
      if (!ok) {  // a stranger, or a peer gone before it proved anything
        INFO(kNet, "NET/Socket: dropped a connection that did not prove the communicator's secret");
        close(fd);
        continue;
      }
      Arriving& a = l.arriving[std::vector<uint8_t>(got.connId, got.connId + kConnIdBytes)];
      if (a.fds.empty()) a.fds.assign(got.lanes, -1);
      if (a.fds.size() != got.lanes || a.fds[got.lane] >= 0) {  // only a peer with the secret gets here
        WARN("NET/Socket: a connection's lane %u of %u came twice, or with another count", got.lane, got.lanes);
        close(fd);
        return ncclRemoteError;
      }
      tune(fd);
      a.fds[got.lane] = fd;
      if (++a.count < static_cast<int>(a.fds.size())) continue;
      std::vector<int> fds = std::move(a.fds);
      l.arriving.erase(std::vector<uint8_t>(got.connId, got.connId + kConnIdBytes));
      std::unique_ptr<SocketStream> stream(new SocketStream(std::move(fds), false));
      NCCLCHECK(stream->startHelpers(helpersFor()));
      *recvComm = stream.release();
      return ncclSuccess;
    }
    return ncclSuccess;
  }

  ncclResult_t regMr(void*, void*, size_t, int type, void** mhandle) override {
    *mhandle = nullptr;
    if (type != NCCL_PTR_HOST) {
      WARN("NET/Socket: only host memory can be registered (type %d)", type);
      return ncclInvalidArgument;
    }
    return ncclSuccess;
  }
  ncclResult_t deregMr(void*, void*) override { return ncclSuccess; }

  ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void*, void** request) override {
    return static_cast<SocketStream*>(sendComm)->post(static_cast<char*>(data), size, static_cast<uint32_t>(tag),
                                                      request);
  }
  ncclResult_t irecv(void* recvComm, void* data, size_t size, int tag, void*, void** request) override {
    return static_cast<SocketStream*>(recvComm)->post(static_cast<char*>(data), size, static_cast<uint32_t>(tag),
                                                      request);
  }
  ncclResult_t test(void* request, int* done, size_t* size) override {
    return SocketStream::test(request, done, size);
  }

  ncclResult_t progress(void* sendComm) override { return static_cast<SocketStream*>(sendComm)->progress(); }
  ncclResult_t closeSend(void* sendComm) override {
    delete static_cast<SocketStream*>(sendComm);
    return ncclSuccess;
  }
  ncclResult_t closeRecv(void* recvComm) override {
    delete static_cast<SocketStream*>(recvComm);
    return ncclSuccess;
  }
  ncclResult_t closeListen(void* listenComm) override {
    delete static_cast<Listen*>(listenComm);
    return ncclSuccess;
  }
  bool readsSendsOnlyInCalls() const override { return helpersFor() <= 1; }
  int pollFds(void* comm, pollfd* fds, int max) const override {
    return static_cast<const SocketStream*>(comm)->pollFds(fds, max);
  }

 private:
  // The interfaces of device `dev` (one, or a merged device's: the first
  // *active of them carry, the others stand by; `activeOnly`: those alone).
  bool nicsOf(int dev, std::vector<int>* out, int* active = nullptr, bool activeOnly = false) {
    const int phys = devices();
    std::lock_guard<std::mutex> lock(mu_);
    if (dev >= 0 && dev < phys) {
      *out = {dev};
      if (active) *active = 1;
      return true;
    }
    if (dev >= phys && dev - phys < static_cast<int>(merged_.size())) {
      const Merged& m = merged_[dev - phys];
      *out = m.nics;
      if (activeOnly) out->resize(static_cast<size_t>(m.active));
      if (active) *active = m.active;
      return true;
    }
    WARN("NET/Socket: device %d does not exist (%d device(s): NCCL_SOCKET_IFNAME; %zu merged)", dev, phys,
         merged_.size());
    return false;
  }

  // Every lane's socket, bound to its NIC, connecting without blocking.
  ncclResult_t startLanes(const std::vector<int>& nics, int active, const Handle& h, Connecting* c) {
    // Lane j joins our j-th NIC to the peer's j-th address: where one side
    // merged more (its settings or address families differ), the extra ones
    // go unused rather than pair across rails.
    const int usable = std::min(static_cast<int>(nics.size()), static_cast<int>(h.nics));
    const int lanes = std::max(lanesFor(usable), 1);
    c->standby.assign(static_cast<size_t>(lanes), false);
    for (int j = 0; j < lanes; ++j) c->standby[j] = j % usable >= active;
    uint8_t connId[kConnIdBytes];
    NCCLCHECK(randomBytes(connId, kConnIdBytes));
    c->lanes.resize(lanes);
    c->severalNics = usable > 1;
    for (int j = 0; j < lanes; ++j) {
      LaneConnecting& l = c->lanes[j];
      l.to = getAddr(h, j % usable);
      l.proof.magic = kMagic;
      l.proof.lane = static_cast<uint16_t>(j);
      l.proof.lanes = static_cast<uint16_t>(lanes);
      memcpy(l.proof.connId, connId, kConnIdBytes);
      const NetIf& from = ifs_[nics[j % usable]];
      l.fd = socket(l.to.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (l.fd < 0) {
        WARN("NET/Socket: socket() failed: %s", strerror(errno));
        return ncclSystemError;
      }
      int one = 1;  // the port is chosen at connect, per destination: binding does not use one up
      setsockopt(l.fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
      if (from.addr.sa.sa_family == l.to.sa.sa_family && bind(l.fd, &from.addr.sa, addrLen(from.addr)) != 0) {
        WARN("NET/Socket: cannot leave from %s (%s): %s", from.name.c_str(), addrToString(from.addr).c_str(),
             strerror(errno));
        return ncclSystemError;
      }
      if (::connect(l.fd, &l.to.sa, addrLen(l.to)) != 0 && errno != EINPROGRESS) {
        WARN("NET/Socket: connect from %s to %s failed: %s", from.name.c_str(), addrToString(l.to).c_str(),
             strerror(errno));
        return ncclRemoteError;
      }
    }
    return ncclSuccess;
  }

  // One lane's handshake as far as it goes now: the listener's challenge
  // (which also says the connection is up), then the proof.
  static ncclResult_t advance(const uint8_t* secret, const Handle& h, LaneConnecting* l, bool* done) {
    *done = false;
    while (l->got < kNonceBytes) {
      const ssize_t k = recv(l->fd, l->challenge + l->got, kNonceBytes - l->got, MSG_DONTWAIT);
      if (k < 0 && (socketWouldBlock() || errno == ENOTCONN)) return ncclSuccess;
      if (k <= 0) {
        WARN("NET/Socket: connecting to %s failed: %s", addrToString(l->to).c_str(),
             k == 0 ? "the listener closed the connection" : strerror(errno));
        return ncclRemoteError;
      }
      l->got += static_cast<size_t>(k);
      if (l->got == kNonceBytes) sign(secret, h.nonce, l->challenge, &l->proof);
    }
    while (l->sent < sizeof(l->proof)) {
      const ssize_t k = send(l->fd, reinterpret_cast<char*>(&l->proof) + l->sent, sizeof(l->proof) - l->sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k < 0 && socketWouldBlock()) return ncclSuccess;
      if (k < 0) {
        WARN("NET/Socket: sending to %s failed: %s", addrToString(l->to).c_str(), strerror(errno));
        return ncclRemoteError;
      }
      l->sent += static_cast<size_t>(k);
    }
    *done = true;
    return ncclSuccess;
  }

  // Takes what the listeners' backlogs hold, each lane with a challenge of its
  // own. At most kMaxPending wait for their proof: a lane silent past the
  // grace goes for a new one; else the rest stay in the backlog for now.
  static void takeBacklog(Listen* l) {
    const uint64_t now = nowMs();
    for (int lfd : l->fds)
      for (;;) {
        if (l->pending.size() == kMaxPending) {
          auto old = std::find_if(l->pending.begin(), l->pending.end(),
                                  [&](const Pending& p) { return p.got == 0 && now - p.sinceMs >= kPendingGraceMs; });
          if (old == l->pending.end()) return;
          close(old->fd);
          l->pending.erase(old);
        }
        const int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
          if (!socketWouldBlock() && errno != ECONNABORTED)
            WARN("NET/Socket: accepting a connection failed: %s", strerror(errno));
          break;
        }
        Pending p{};
        p.fd = fd;
        p.sinceMs = now;
        if (randomBytes(p.challenge, kNonceBytes) != ncclSuccess ||
            send(fd, p.challenge, kNonceBytes, MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(kNonceBytes)) {
          close(fd);  // a new socket takes 16 bytes at once; one that does not is of no use
          continue;
        }
        l->pending.push_back(p);
      }
  }

  std::mutex mu_;
  bool probed_ = false;
  std::vector<NetIf> ifs_;
  struct Merged {
    std::vector<int> nics;
    int active;  // nics[0, active) carry; the others stand by (failover)
    bool operator==(const Merged& o) const { return nics == o.nics && active == o.active; }
  };
  std::vector<Merged> merged_;  // device ifs_.size() + i merges merged_[i]
};

}  // namespace

NetBackend* socketBackend() {
  static SocketNet* backend = new SocketNet();  // never destroyed: connections may outlive static destruction
  return backend;
}

}  // namespace accl
