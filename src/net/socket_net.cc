// ACCL's TCP backend ("Socket"): every interface NCCL_SOCKET_IFNAME selects
// is a device. A connection is one TCP socket that leaves from its device's
// address (bound, so that the kernel does not send every connection out of
// one interface). It proves the communicator's secret before it is taken:
// the listener sends each connection a random challenge, and the sender
// answers with an HMAC of the handle's nonce and that challenge, so that a
// stranger who reads the handle, or the answer on the wire, still cannot
// connect. Messages are frames (size, tag, payload) that complete in order;
// requests move when tested, without threads of their own.
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <vector>

#include "base/debug.h"
#include "base/sha256.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "net/net.h"
#include "plugin/nccl_net.h"

namespace accl {
namespace {

constexpr uint32_t kMagic = 0x746e6361;  // "acnt"
constexpr char kLabel[] = "ACCL net connection";
constexpr size_t kNonceBytes = 16;
constexpr size_t kMaxPending = 16;  // connections being accepted whose proof has not come in full
constexpr int kPendingGraceMs = 100;  // past this, a pending connection may be dropped for a newer one

// The handle, as it travels: where to connect, and the listener's nonce.
struct Handle {
  uint32_t magic;
  uint32_t dev;
  SockAddr addr;
  uint8_t nonce[kNonceBytes];
};
static_assert(sizeof(Handle) <= kNetHandleBytes, "a handle is at most NCCL_NET_HANDLE_MAXSIZE bytes");

struct Proof {
  uint32_t magic;
  uint8_t mac[kSha256Bytes];
};

// HMAC-SHA256(secret, label | nonce | challenge): bound to this listener and
// to this one connection, so that it proves nothing anywhere else.
void proofOf(const uint8_t* secret, const uint8_t* nonce, const uint8_t* challenge, Proof* p) {
  uint8_t msg[sizeof(kLabel) + 2 * kNonceBytes];
  memcpy(msg, kLabel, sizeof(kLabel));
  memcpy(msg + sizeof(kLabel), nonce, kNonceBytes);
  memcpy(msg + sizeof(kLabel) + kNonceBytes, challenge, kNonceBytes);
  p->magic = kMagic;
  hmacSha256(secret, kSecretBytes, msg, sizeof(msg), p->mac);
}

// A sender's connection being made (connect's progress).
struct Connecting {
  int fd = -1;
  uint8_t challenge[kNonceBytes];
  size_t got = 0;    // of the challenge
  Proof proof{};
  size_t sent = 0;   // of the proof
  ~Connecting() {
    if (fd >= 0) close(fd);
  }
};

uint64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Comm;
struct Request {
  Comm* comm;
  char* data;
  size_t size;       // send: the payload; recv: the most it may take
  uint32_t tag;      // what the frame must carry (messages match in order)
  uint32_t head[2];  // the frame's size and tag, as sent or received
  size_t moved = 0;  // bytes of the frame (head, then payload) moved so far
  bool complete = false;
};

struct Comm {
  Comm(int fd, bool send) : fd(fd), send(send) {}
  int fd;
  bool send;
  bool broken = false;
  std::deque<Request*> queue;      // in the order they were made; the front one moves first
  std::vector<Request*> finished;  // complete, not yet tested (freed with the comm if never)
  ~Comm() {
    for (Request* r : queue) delete r;
    for (Request* r : finished) delete r;
    close(fd);
  }
};

struct Pending {
  int fd;
  uint64_t sinceMs;
  uint8_t challenge[kNonceBytes];
  size_t got = 0;
  Proof proof{};
};

struct Listen {
  int fd;
  uint8_t nonce[kNonceBytes];
  uint8_t secret[kSecretBytes];
  std::vector<Pending> pending;
  ~Listen() {
    for (Pending& p : pending) close(p.fd);
    close(fd);
  }
};

bool wouldBlock() { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR; }

// Moves one request's frame as far as the socket allows now. False: the
// connection broke (or the peer sent what no request can take).
bool move(Request* r) {
  Comm& c = *r->comm;
  const size_t headBytes = sizeof(r->head);
  while (!r->complete) {
    if (c.send) {
      const size_t total = headBytes + r->size;
      iovec iov[2];
      int n = 0;
      if (r->moved < headBytes) iov[n++] = {reinterpret_cast<char*>(r->head) + r->moved, headBytes - r->moved};
      const size_t off = r->moved > headBytes ? r->moved - headBytes : 0;
      if (r->size > off) iov[n++] = {r->data + off, r->size - off};
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = n;
      const ssize_t k = sendmsg(c.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k < 0) return wouldBlock();
      r->moved += static_cast<size_t>(k);
      r->complete = r->moved == total;
      if (!r->complete && k == 0) return true;
      continue;
    }
    if (r->moved < headBytes) {
      const ssize_t k = recv(c.fd, reinterpret_cast<char*>(r->head) + r->moved, headBytes - r->moved, MSG_DONTWAIT);
      if (k == 0) return false;  // closed
      if (k < 0) return wouldBlock();
      r->moved += static_cast<size_t>(k);
      if (r->moved < headBytes) continue;
      if (r->head[0] > r->size || r->head[1] != r->tag) {
        WARN("NET/Socket: a message of %u bytes with tag %u came where one of at most %zu bytes with tag %u was "
             "expected", r->head[0], r->head[1], r->size, r->tag);
        return false;
      }
    }
    const size_t total = headBytes + r->head[0];
    if (r->moved < total) {
      const ssize_t k = recv(c.fd, r->data + (r->moved - headBytes), total - r->moved, MSG_DONTWAIT);
      if (k == 0) return false;
      if (k < 0) return wouldBlock();
      r->moved += static_cast<size_t>(k);
    }
    r->complete = r->moved == total;
    if (!r->complete) return true;
  }
  return true;
}

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

  ncclResult_t properties(int dev, NetDeviceProps* out) override {
    if (!valid(dev)) return ncclInvalidArgument;
    const NetIf& i = ifs_[dev];
    *out = NetDeviceProps();
    out->name = i.name;
    char path[PATH_MAX];
    if (realpath(("/sys/class/net/" + i.name + "/device").c_str(), path)) out->pciPath = path;
    out->guid = static_cast<uint64_t>(dev);
    out->ptrSupport = NCCL_PTR_HOST;
    out->speedMbps = linkSpeed(i.name);
    out->maxComms = 65536;
    out->maxRecvs = 1;
    return ncclSuccess;
  }

  ncclResult_t listen(int dev, const uint8_t* secret, void* handle, void** listenComm) override {
    *listenComm = nullptr;
    if (!valid(dev)) return ncclInvalidArgument;
    auto* h = static_cast<Handle*>(handle);
    memset(h, 0, kNetHandleBytes);
    auto* l = new Listen();
    int fd = -1;
    const ncclResult_t r = socketListen(ifs_[dev].addr, &fd, &h->addr);
    if (r != ncclSuccess) {
      l->fd = -1;
      delete l;
      return r;
    }
    l->fd = fd;
    tune(fd);
    if (randomBytes(l->nonce, kNonceBytes) != ncclSuccess) {
      delete l;
      return ncclSystemError;
    }
    memcpy(l->secret, secret, kSecretBytes);
    h->magic = kMagic;
    h->dev = static_cast<uint32_t>(dev);
    memcpy(h->nonce, l->nonce, kNonceBytes);
    *listenComm = l;
    return ncclSuccess;
  }

  ncclResult_t connect(int dev, const uint8_t* secret, void* handle, void** progress, void** sendComm) override {
    *sendComm = nullptr;
    const auto* h = static_cast<const Handle*>(handle);
    auto* c = static_cast<Connecting*>(*progress);
    if (!c) {  // start: a socket bound to this side's device, connecting without blocking
      if (h->magic != kMagic) {
        WARN("NET/Socket: the handle to connect to is not one of ACCL's socket backend (magic 0x%x)", h->magic);
        return ncclInvalidArgument;
      }
      if (!valid(dev)) return ncclInvalidArgument;
      const int fd = socket(h->addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) {
        WARN("NET/Socket: socket() failed: %s", strerror(errno));
        return ncclSystemError;
      }
      *progress = c = new Connecting();
      c->fd = fd;
      int one = 1;  // the port is chosen at connect, per destination: binding does not use one up
      setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
      SockAddr local = ifs_[dev].addr;
      if (local.sa.sa_family == h->addr.sa.sa_family && bind(fd, &local.sa, addrLen(local)) != 0) {
        WARN("NET/Socket: cannot leave from %s (%s): %s", ifs_[dev].name.c_str(), addrToString(local).c_str(),
             strerror(errno));
        return ncclSystemError;
      }
      if (::connect(fd, &h->addr.sa, addrLen(h->addr)) != 0 && errno != EINPROGRESS) {
        WARN("NET/Socket: connect to %s failed: %s", addrToString(h->addr).c_str(), strerror(errno));
        return ncclRemoteError;
      }
    }
    while (c->got < kNonceBytes) {  // the listener's challenge (also: the connection is up)
      const ssize_t k = recv(c->fd, c->challenge + c->got, kNonceBytes - c->got, MSG_DONTWAIT);
      if (k < 0 && (wouldBlock() || errno == ENOTCONN)) return ncclSuccess;
      if (k <= 0) {
        WARN("NET/Socket: connecting to %s failed: %s", addrToString(h->addr).c_str(),
             k == 0 ? "the listener closed the connection" : strerror(errno));
        return ncclRemoteError;
      }
      c->got += static_cast<size_t>(k);
      if (c->got == kNonceBytes) proofOf(secret, h->nonce, c->challenge, &c->proof);
    }
    while (c->sent < sizeof(c->proof)) {
      const ssize_t k = send(c->fd, reinterpret_cast<char*>(&c->proof) + c->sent, sizeof(c->proof) - c->sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k < 0 && wouldBlock()) return ncclSuccess;
      if (k < 0) {
        WARN("NET/Socket: sending to %s failed: %s", addrToString(h->addr).c_str(), strerror(errno));
        return ncclRemoteError;
      }
      c->sent += static_cast<size_t>(k);
    }
    tune(c->fd);
    *sendComm = new Comm(c->fd, true);
    c->fd = -1;
    delete c;
    *progress = nullptr;
    return ncclSuccess;
  }
  void cancelConnect(void* progress) override { delete static_cast<Connecting*>(progress); }

  ncclResult_t accept(void* listenComm, void** recvComm) override {
    *recvComm = nullptr;
    Listen& l = *static_cast<Listen*>(listenComm);
    const uint64_t now = nowMs();
    for (;;) {  // take what the backlog holds, each with a challenge of its own
      const int fd = accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (!wouldBlock() && errno != ECONNABORTED)
          WARN("NET/Socket: accepting a connection failed: %s", strerror(errno));
        break;
      }
      if (l.pending.size() == kMaxPending) {  // a flood: a connection silent past the grace goes, else this one
        auto old = std::find_if(l.pending.begin(), l.pending.end(),
                                [&](const Pending& p) { return p.got == 0 && now - p.sinceMs >= kPendingGraceMs; });
        if (old == l.pending.end()) {
          close(fd);
          continue;
        }
        close(old->fd);
        l.pending.erase(old);
      }
      Pending p{};
      p.fd = fd;
      p.sinceMs = now;
      if (randomBytes(p.challenge, kNonceBytes) != ncclSuccess ||
          send(fd, p.challenge, kNonceBytes, MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(kNonceBytes)) {
        close(fd);  // a new socket takes 16 bytes at once; one that does not is of no use
        continue;
      }
      l.pending.push_back(p);
    }
    for (size_t i = 0; i < l.pending.size();) {
      Pending& p = l.pending[i];
      const ssize_t k = recv(p.fd, reinterpret_cast<char*>(&p.proof) + p.got, sizeof(p.proof) - p.got, MSG_DONTWAIT);
      if (k < 0 && wouldBlock()) {
        ++i;
        continue;
      }
      if (k > 0) p.got += static_cast<size_t>(k);
      if (k > 0 && p.got < sizeof(p.proof)) continue;
      Proof want;
      proofOf(l.secret, l.nonce, p.challenge, &want);
      const bool ok = k > 0 && p.proof.magic == kMagic && secretEqual(p.proof.mac, want.mac);
      const int fd = p.fd;
      l.pending.erase(l.pending.begin() + static_cast<long>(i));
      if (!ok) {  // a stranger, or a peer gone before it proved anything
        INFO(kNet, "NET/Socket: dropped a connection that did not prove the communicator's secret");
        close(fd);
        continue;
      }
      tune(fd);
      *recvComm = new Comm(fd, false);
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
    return post(static_cast<Comm*>(sendComm), static_cast<char*>(data), size, tag, request);
  }
  ncclResult_t irecv(void* recvComm, void* data, size_t size, int tag, void*, void** request) override {
    return post(static_cast<Comm*>(recvComm), static_cast<char*>(data), size, tag, request);
  }

  ncclResult_t test(void* request, int* done, size_t* size) override {
    auto* r = static_cast<Request*>(request);
    Comm& c = *r->comm;
    *done = 0;
    while (!r->complete && !c.broken && !c.queue.empty()) {  // up to r: no system call for the ones after it
      Request* front = c.queue.front();
      if (!move(front)) c.broken = true;
      if (!front->complete) break;
      c.queue.pop_front();
      c.finished.push_back(front);
    }
    if (!r->complete) return c.broken ? ncclRemoteError : ncclSuccess;
    *done = 1;
    if (size) *size = c.send ? r->size : r->head[0];
    c.finished.erase(std::find(c.finished.begin(), c.finished.end(), r));
    delete r;
    return ncclSuccess;
  }

  ncclResult_t closeSend(void* sendComm) override {
    delete static_cast<Comm*>(sendComm);
    return ncclSuccess;
  }
  ncclResult_t closeRecv(void* recvComm) override {
    delete static_cast<Comm*>(recvComm);
    return ncclSuccess;
  }
  ncclResult_t closeListen(void* listenComm) override {
    delete static_cast<Listen*>(listenComm);
    return ncclSuccess;
  }
  int waitFd(void* comm) const override { return static_cast<Comm*>(comm)->fd; }

 private:
  bool valid(int dev) {
    if (dev >= 0 && dev < devices()) return true;
    WARN("NET/Socket: device %d does not exist (%d device(s): NCCL_SOCKET_IFNAME)", dev, devices());
    return false;
  }

  ncclResult_t post(Comm* c, char* data, size_t size, int tag, void** request) {
    *request = nullptr;
    if (c->broken) return ncclRemoteError;
    if (size > UINT32_MAX) return ncclInvalidArgument;
    if (c->queue.size() >= NCCL_NET_MAX_REQUESTS) return ncclSuccess;  // would block: call again
    const auto t = static_cast<uint32_t>(tag);
    auto* r = new Request{c, data, size, t, {static_cast<uint32_t>(size), t}};
    c->queue.push_back(r);
    *request = r;
    return ncclSuccess;
  }

  std::mutex mu_;
  bool probed_ = false;
  std::vector<NetIf> ifs_;
};

}  // namespace

NetBackend* socketBackend() {
  static SocketNet* backend = new SocketNet();  // never destroyed: connections may outlive static destruction
  return backend;
}

}  // namespace accl
