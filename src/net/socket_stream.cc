// A connection of ACCL's TCP backend: lanes, frames, in-order completion,
// helper threads (net/socket_stream.h).
#include "net/socket_stream.h"

#include <ifaddrs.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "base/check.h"
#include "base/debug.h"
#include "base/param.h"
#include "base/threads.h"
#include "base/wait.h"
#include "bootstrap/socket.h"
#include "plugin/nccl_net.h"

namespace accl {
namespace {

// With several lanes, a lane starts with a kernel send buffer (bytes unsent
// or not yet acknowledged) this small, and never has less, so that it has
// room for a new frame only once most of its earlier ones have arrived: a
// slow lane's backlog stays short, and the frames it would have queued go
// to lanes that move. The kernel gives twice this and says a lane is
// writable again once a third of that is free. Measured on the emulated
// network (docs/perf.md): with larger buffers (or frames) for every lane the
// lanes fill in one burst of the sender's and drain apart, and a port at
// half the rate took an equal share. A lane seen to move faster gets a
// buffer of kLaneWindowUs of its rate (as far as the kernel allows:
// net.core.wmem_max), and frames an eighth of that.
constexpr int kLaneBufferBytes = 64 << 10;
constexpr uint64_t kLaneWindowUs = 1000;
constexpr uint64_t kWatchUs = 2000;  // a lane's rate: one sample this often at most
constexpr int kMaxLanes = 64;
// A helper with nothing to do looks at the stop this often (a post or the
// stop wakes it at once).
constexpr int kHelperIdleMs = 100;
// Failover: a sender looks at its lanes' acknowledged bytes this often.
constexpr uint64_t kCheckUs = 1000;
// A receiver remembers where on a lane its frames began, for the last this
// many bytes and frames of it: a cut may fall that far back (at most what the
// sender had unacknowledged, its room).
constexpr uint64_t kSeenBytes = 16 << 20;
constexpr size_t kSeenFrames = 8192;
constexpr size_t kSinkBytes = 64 << 10;
constexpr uint8_t kTcpCaLoss = 4;  // tcp_info's ca_state while TCP recovers from a timeout
// Failover: a lane given up retries at least this often while its port is
// down, so that its return is seen within about this long (TCP's own
// backoff reaches 120 s: twice the outage). TCP_RTO_MAX_MS (Linux 6.15;
// older kernels refuse it and keep their backoff), with the connection's
// deadline kept where the default puts it (tcp_retries2 = 15: ~924 s),
// which a shorter backoff would bring forward. Only while it is out: a
// user timeout would also end a live lane whose peer's window stayed shut
// that long (a receiver that posts nothing), and a lane taken back gets
// TCP's defaults again.
constexpr int kTcpRtoMaxMs = 44;  // TCP_RTO_MAX_MS
constexpr int kLaneRetryMs = 1000;
constexpr int kLaneDeadlineMs = 924000;
// Notices name a lane's generation in 16 bits: a lane comes back at most this often.
constexpr uint32_t kMaxGenerations = 0xffff;

// Lane fd is out (retry often, TCP's deadline kept) or back (TCP's defaults).
void retryOften(int fd, bool out, int defaultRtoMaxMs) {
  const int rto = out ? kLaneRetryMs : defaultRtoMaxMs, deadline = out ? kLaneDeadlineMs : 0;
  if (rto > 0 && setsockopt(fd, IPPROTO_TCP, kTcpRtoMaxMs, &rto, sizeof(int)) == 0)
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &deadline, sizeof(int));
}

// TCP's own view of fd (false: it cannot be read).
bool tcpInfo(int fd, tcp_info* ti) {
  *ti = tcp_info{};
  socklen_t len = sizeof(*ti);
  return getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len) == 0;
}

// Whether TCP is retransmitting on fd (after a timeout): the peer's
// acknowledgements stopped for want of a path, not of room at the peer (a
// zero window sends probes, which count elsewhere).
bool retransmitting(int fd) {
  tcp_info ti;
  return tcpInfo(fd, &ti) && (ti.tcpi_retransmits > 0 || ti.tcpi_ca_state == kTcpCaLoss);
}

// Whether fd's TCP connection still stands (no reset, no timeout).
bool established(int fd) {
  tcp_info ti;
  return tcpInfo(fd, &ti) && ti.tcpi_state == TCP_ESTABLISHED;
}

// The interface of `all` that holds fd's own address (null: none does).
const ifaddrs* ownInterface(int fd, const ifaddrs* all) {
  SockAddr me{};
  socklen_t len = sizeof(me);
  if (getsockname(fd, &me.sa, &len) != 0) return nullptr;
  for (const ifaddrs* i = all; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != me.sa.sa_family) continue;
    if (me.sa.sa_family == AF_INET
            ? reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == me.sin.sin_addr.s_addr
            : memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, &me.sin6.sin6_addr,
                     sizeof(in6_addr)) == 0)
      return i;
  }
  return nullptr;
}

// Whether the interface fd leaves from is down (no carrier, or taken down):
// what fd writes then never leaves, so TCP keeps it unsent (probing) rather
// than retransmitting it.
bool localLinkDown(int fd) {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return false;
  const ifaddrs* i = ownInterface(fd, all);
  const bool down = i && (!(i->ifa_flags & IFF_UP) || !(i->ifa_flags & IFF_RUNNING));
  freeifaddrs(all);
  return down;
}

// Bytes a socket's peer has not acknowledged yet (0 where it cannot be told).
size_t unacked(int fd) {
  int queued = 0;
  return ioctl(fd, SIOCOUTQ, &queued) == 0 && queued > 0 ? static_cast<size_t>(queued) : 0;
}

// "10.0.0.1:5 (nic0p1) -> 10.0.1.1:7": a lane and the NIC it leaves from, for the log.
std::string laneName(int fd) {
  SockAddr me{}, peer{};
  socklen_t a = sizeof(me), b = sizeof(peer);
  if (getsockname(fd, &me.sa, &a) != 0 || getpeername(fd, &peer.sa, &b) != 0) return "a socket";
  std::string nic;
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) == 0) {
    if (const ifaddrs* i = ownInterface(fd, all)) nic = std::string(" (") + i->ifa_name + ")";
    freeifaddrs(all);
  }
  return addrToString(me) + nic + " -> " + addrToString(peer);
}

void poke(int fd) {
  const uint64_t one = 1;
  (void)!write(fd, &one, sizeof(one));
}

void drain(int fd) {
  uint64_t n;
  (void)!read(fd, &n, sizeof(n));
}

}  // namespace

SocketStream::SocketStream(std::vector<int> fds, bool send, bool failover, const std::vector<bool>& standby)
    : send_(send), failover_(send && failover && fds.size() > 1), lanes_(fds.size()) {  // sized once: lanes do not move
  const int64_t ms = paramInt(Param::LaneTimeoutMs);
  laneTimeoutUs_ = static_cast<uint64_t>(std::max<int64_t>(ms, 0)) * 1000;
  rejoinUs_ = laneTimeoutUs_;
  if (ms <= 0) failover_ = false;
  const uint64_t now = nowUs();
  for (size_t i = 0; i < fds.size(); ++i) {
    lanes_[i].fd = fds[i];
    lanes_[i].stillUs = now;
    lanes_[i].standby = i < standby.size() && standby[i];
    if (send && fds.size() > 1) sizeLane(lanes_[i], 2 * kLaneBufferBytes);
    socklen_t len = sizeof(int);
    if (failover_ && getsockopt(fds[i], IPPROTO_TCP, kTcpRtoMaxMs, &lanes_[i].rtoMaxMs, &len) != 0)
      lanes_[i].rtoMaxMs = 0;  // the kernel has no such option
  }
}

// Gives lane l a kernel send buffer of about `want` bytes (the kernel may
// give less), its room (19/20 of what it gave) and its frames' size.
void SocketStream::sizeLane(Lane& l, size_t want) {
  if (failover_) want = std::min<size_t>(want, kSeenBytes / 2);  // a cut falls within what the receiver remembers
  int bytes = static_cast<int>(std::min<size_t>(want / 2, INT_MAX / 2));  // the kernel doubles it
  socklen_t len = sizeof(bytes);
  setsockopt(l.fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  if (getsockopt(l.fd, SOL_SOCKET, SO_SNDBUF, &bytes, &len) != 0 || bytes <= 0) bytes = static_cast<int>(want);
  if (static_cast<size_t>(bytes) < want) l.most = static_cast<size_t>(bytes);  // wmem_max: asking again is in vain
  l.room = static_cast<size_t>(bytes) * 19 / 20;
  l.frame = std::clamp<size_t>(l.room / 8 / 4096 * 4096, kMinFrameBytes, kMaxFrameBytes);
}

// A look at lane l's unacknowledged bytes (l.queued, just read): from two
// looks kWatchUs or more apart, the first with bytes in flight, the rate it
// moves (a lower bound: it may have emptied meanwhile); a lane whose
// kLaneWindowUs of that rate is well past its buffer gets a larger one, one
// whose rate fell back a smaller one (never below the first).
void SocketStream::watchLane(Lane& l, uint64_t now) {
  if (l.seenUs && now - l.seenUs < kWatchUs) return;
  const uint64_t acked = l.bytes - std::min<uint64_t>(l.bytes, l.queued);
  if (l.seenUs && l.seenBusy) {
    const double sample = static_cast<double>(acked - l.seenAcked) / static_cast<double>(now - l.seenUs);
    l.rate = l.rate > 0 ? (l.rate + sample) / 2 : sample;
    const size_t have = l.room * 20 / 19;
    const size_t want = std::max<size_t>(static_cast<size_t>(l.rate * kLaneWindowUs), 2 * kLaneBufferBytes);
    if ((want > have + have / 4 && have < l.most) || (want < have / 2 && have > 2 * kLaneBufferBytes))
      sizeLane(l, want);
  }
  l.seenUs = now;
  l.seenAcked = acked;
  l.seenBusy = l.queued > 0;
}

SocketStream::~SocketStream() {
  stop_.store(true);
  for (auto& h : helpers_) {
    poke(h->wakeFd);
    if (h->thread.joinable()) h->thread.join();
    close(h->wakeFd);
  }
  if (doneFd_ >= 0) close(doneFd_);
  if (lanes_.size() > 1 && logEnabled(LogLevel::Info, kNet)) {  // how the lanes shared the work
    std::string shares;
    for (const Lane& l : lanes_)
      shares += " " + std::to_string(l.bytes >> 20) + " MiB" +
                (send_ ? " (" + std::to_string(l.room >> 10) + " KiB room, " +
                             std::to_string(static_cast<int>(l.rate)) + " MB/s)"
                       : "");
    INFO(kNet, "NET/Socket: a %s connection of %zu sockets (%zu helper threads) closes; they carried%s%s",
         send_ ? "send" : "receive", lanes_.size(), helpers_.size(), shares.c_str(),
         send_ ? "" : (", at most " + std::to_string(maxStaged_ >> 10) + " KiB held ahead of the posts").c_str());
  }
  for (Request* r : queue_) delete r;
  for (Lane& l : lanes_) close(l.fd);
}

ncclResult_t SocketStream::startHelpers(int threads) {
  const size_t n = std::min(static_cast<size_t>(std::max(threads, 0)), lanes_.size());
  if (n <= 1) return ncclSuccess;
  if (failover_) INFO(kNet, "NET/Socket: a connection moved by helper threads does not fail over (unset NCCL_SOCKET_NTHREADS for it)");
  failover_ = false;  // a lane's frames would go to another helper's lane
  doneFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (doneFd_ < 0) {
    WARN("NET/Socket: eventfd failed: %s", strerror(errno));
    return ncclSystemError;
  }
  for (size_t t = 0; t < n; ++t) {  // helper t moves lanes [t*L/n, (t+1)*L/n)
    auto h = std::make_unique<Helper>();
    h->begin = t * lanes_.size() / n;
    h->end = (t + 1) * lanes_.size() / n;
    h->wakeFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (h->wakeFd < 0) {
      WARN("NET/Socket: eventfd failed: %s", strerror(errno));
      return ncclSystemError;
    }
    Helper* raw = h.get();
    helpers_.push_back(std::move(h));
    NCCLCHECK(startThread(&raw->thread, [this, raw] { helperLoop(raw); },
                          "a helper thread of a %s connection (NCCL_SOCKET_NTHREADS)", send_ ? "send" : "receive"));
  }
  return ncclSuccess;
}

ncclResult_t SocketStream::post(char* data, size_t size, uint32_t tag, void** request) {
  *request = nullptr;
  if (size > UINT32_MAX) return ncclInvalidArgument;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) return ncclRemoteError;
    if (queue_.size() >= NCCL_NET_MAX_REQUESTS) return ncclSuccess;  // would block: call again
    auto* r = new Request{this, data, size, tag, nextSeq_++, send_ ? size : SIZE_MAX, 0, false, 0, 0};
    queue_.push_back(r);
    *request = r;
    if (!send_) {
      for (auto s = staged_.begin(); s != staged_.end();) {  // frames of it that came first
        auto next = std::next(s);
        if (s->head.seq == r->seq && !claim(s, r)) broken_ = true;
        s = next;
      }
      posts_.fetch_add(1);  // a blocked lane may hold the head of this one's frame
    }
  }
  for (auto& h : helpers_) poke(h->wakeFd);
  return ncclSuccess;
}

ncclResult_t SocketStream::test(void* request, int* done, size_t* size) {
  auto* r = static_cast<Request*>(request);
  return r->stream->test(r, done, size);
}

ncclResult_t SocketStream::test(Request* r, int* done, size_t* size) {
  *done = 0;
  if (helpers_.empty()) {
    if (!(send_ ? moveSend(0, lanes_.size(), &turn_) : moveRecv(0, lanes_.size()))) {
      std::lock_guard<std::mutex> lock(mu_);
      broken_ = true;
    }
  } else {
    drain(doneFd_);  // before looking: a completion after the look writes again
  }
  std::lock_guard<std::mutex> lock(mu_);
  const ncclResult_t notYet = broken_ || eofLanes_ == lanes_.size() ? ncclRemoteError : ncclSuccess;
  auto it = queue_.begin();
  for (; *it != r; ++it)
    if (!(*it)->complete()) return notYet;  // an older one first
  if (!r->complete()) return notYet;
  *done = 1;
  if (size) *size = r->total;
  queue_.erase(it);
  delete r;
  return ncclSuccess;
}

ncclResult_t SocketStream::progress() {
  if (!failover_) return ncclSuccess;
  bool idle = std::none_of(lanes_.begin(), lanes_.end(), [](const Lane& l) { return l.writing || !l.loose.empty(); });
  if (idle) {
    std::lock_guard<std::mutex> lock(mu_);
    idle = queue_.empty();
  }
  if (idle ? !checkLanes(nowUs()) : !moveSend(0, lanes_.size(), &turn_)) {
    std::lock_guard<std::mutex> lock(mu_);
    broken_ = true;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) return ncclRemoteError;
  }
  const bool holding = std::any_of(lanes_.begin(), lanes_.end(),
                                   [](const Lane& l) { return !l.dead && (!l.held.empty() || !l.loose.empty()); });
  return holding ? ncclInProgress : ncclSuccess;
}

size_t SocketStream::stagedBytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return stagedBytes_;
}

int SocketStream::pollFds(pollfd* fds, int max) const {
  if (!helpers_.empty()) {
    if (max < 1) return 0;
    fds[0] = {doneFd_, POLLIN, 0};
    return 1;
  }
  return lanePollFds(0, lanes_.size(), fds, max);
}

// What lanes [begin, end) wait for: room to write (a frame begun, or none
// taken for want of room), or bytes to read (unless waiting for a post, or
// closed).
int SocketStream::lanePollFds(size_t begin, size_t end, pollfd* fds, int max) const {
  int n = 0;
  for (size_t i = begin; i < end && n < max; ++i) {
    const Lane& l = lanes_[i];
    if (send_ && l.dead) continue;
    if (send_ ? (l.writing || l.blocked) : !recvBlocked(l) && !l.eof)
      fds[n++] = {l.fd, static_cast<short>(send_ ? POLLOUT : POLLIN), 0};
  }
  return n;
}

// Moves its lanes until the stream closes, sleeping on them (and on posts)
// when they cannot move. A lane that breaks marks the stream broken, which
// the next test reports.
void SocketStream::helperLoop(Helper* h) {
  bool ok = true;
  while (!stop_.load()) {
    if (ok && !(send_ ? moveSend(h->begin, h->end, &h->turn) : moveRecv(h->begin, h->end))) {
      ok = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        broken_ = true;
      }
      signalDone();
    }
    pollfd p[kMaxLanes + 1];
    const int n = ok ? lanePollFds(h->begin, h->end, p, kMaxLanes) : 0;
    p[n] = {h->wakeFd, POLLIN, 0};
    if (poll(p, n + 1, kHelperIdleMs) > 0 && p[n].revents) drain(h->wakeFd);
  }
}

void SocketStream::signalDone() {
  if (doneFd_ >= 0) poke(doneFd_);
}

// A frame of r is done (written, or read into place): r counts it.
void SocketStream::finished(Request* r, size_t len) {
  bool complete;
  {
    std::lock_guard<std::mutex> lock(mu_);
    r->moved += len;
    --r->frames;
    complete = r->complete();
  }
  if (complete) signalDone();
}

// The oldest message with bytes in no frame yet, and its next frame's
// length: at most `chunk`. Under mu_.
SocketStream::Request* SocketStream::unframed(size_t chunk, size_t* len) const {
  for (Request* r : queue_)
    if (!r->framed || r->handed < r->size) {
      *len = std::min(chunk, r->size - r->handed);
      return r;
    }
  return nullptr;
}

// Lanes [begin, end): frames begun go on first (a frame stays on its lane).
// Then each new frame goes to a lane with room for all of it (so that no
// message waits on a lane that took a part of it): of those, the one whose
// room is least used by bytes the peer has not acknowledged, the first of
// equals taken in turn. A lane takes work as fast as it moves it: a slow one
// has room less often, and the others carry more. False: a lane broke.
bool SocketStream::moveSend(size_t begin, size_t end, size_t* turn) {
  const size_t n = end - begin;
  const bool several = lanes_.size() > 1;
  for (size_t i = begin; i < end; ++i) {
    Lane& l = lanes_[i];
    l.blocked = false;
    if (!l.dead && l.writing && !writeFrame(l)) return false;
  }
  const uint64_t now = several ? nowUs() : 0;
  if (failover_ && !checkLanes(now)) return false;
  for (size_t i = begin; i < end; ++i) {  // held frames (a cut and what follows it) before new ones
    Lane& l = lanes_[i];
    while (!l.dead && !l.writing && !l.blocked && !l.loose.empty()) {
      beginHeld(l);
      if (!writeFrame(l)) return false;
    }
  }
  const bool standing = !failover_ || primaryLive();  // standby lanes wait
  for (;;) {
    Lane* best = nullptr;
    for (size_t i = 0; i < n; ++i) {
      Lane& l = lanes_[begin + (*turn + i) % n];
      if (l.dead || (l.standby && standing) || l.writing || l.blocked || !l.loose.empty()) continue;
      if (several) {
        l.queued = unacked(l.fd);
        watchLane(l, now);
        if (l.queued + l.frame + sizeof(Frame) > l.room) {  // POLLOUT says when it has room again
          l.blocked = true;
          continue;
        }
      }
      if (!best || l.queued * best->room < best->queued * l.room) best = &l;
    }
    if (!best) return true;
    Request* r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t len = 0;
      r = unframed(several ? best->frame : UINT32_MAX, &len);
      if (!r) return true;
      best->head = {r->seq, r->tag, static_cast<uint32_t>(r->size), static_cast<uint32_t>(r->handed),
                    static_cast<uint32_t>(len)};
      r->handed += len;
      r->framed = true;
      ++r->frames;
    }
    *turn = (*turn + 1) % n;
    beginFrame(*best, r);
    if (!writeFrame(*best)) return false;
  }
}

// Lane l begins the frame in l.head, of request r: from r's memory, or
// (failover) from a copy the lane holds until the peer has it.
void SocketStream::beginFrame(Lane& l, Request* r) {
  l.req = r;
  l.src = r->data + l.head.offset;
  l.writing = true;
  l.moved = 0;
  if (!failover_) return;
  Held h{l.head, std::unique_ptr<char[]>(new char[std::max<uint32_t>(l.head.len, 1)]), nullptr, l.bytes};
  if (l.head.len) memcpy(h.keep.get(), l.src, l.head.len);
  h.payload = l.src = h.keep.get();
  l.held.push_back(std::move(h));
}

// Lane l begins its next frame of no request (a cut, or a frame sent
// again), held until the peer has it.
void SocketStream::beginHeld(Lane& l) {
  Held h = std::move(l.loose.front());
  l.loose.pop_front();
  l.head = h.head;
  l.req = nullptr;
  l.src = h.payload;
  l.writing = true;
  l.moved = 0;
  h.at = l.bytes;
  l.held.push_back(std::move(h));
}

// Failover, every kCheckUs: the bytes each lane's peer acknowledged. Held
// frames it has all of go; a lane with bytes unacknowledged, none
// acknowledged for the lane timeout, and TCP retransmitting or its own
// interface down is given up; a lane given up is watched for its return.
// False: no lane is left.
bool SocketStream::checkLanes(uint64_t now) {
  if (now - checkedUs_ < kCheckUs) return true;
  checkedUs_ = now;
  for (size_t i = 0; i < lanes_.size(); ++i) {
    Lane& l = lanes_[i];
    if (l.dead) {
      watchDeadLane(i, now);
      continue;
    }
    const size_t queued = unacked(l.fd);
    const uint64_t acked = l.bytes - std::min<uint64_t>(l.bytes, queued);
    while (!holdForTest_ && !l.held.empty() && l.held.front().at + sizeof(Frame) + l.held.front().head.len <= acked)
      l.held.pop_front();
    if (acked != l.ackedAt || queued == 0) {
      l.ackedAt = acked;
      l.stillUs = now;
      l.stallWarned = false;
      continue;
    }
    if (now - l.stillUs < laneTimeoutUs_) continue;
    const bool lost = retransmitting(l.fd), down = !lost && localLinkDown(l.fd);
    if (!lost && !down) continue;  // a peer slow to read (a zero window): not a failure
    char why[128];
    snprintf(why, sizeof(why), "no byte acknowledged for %llu ms while %s",
             static_cast<unsigned long long>((now - l.stillUs) / 1000),
             lost ? "TCP retransmits" : "its interface is down");
    // The last lane is never given up: a connection with no way left waits
    // for its link to come back (TCP retransmits), or for ACCL_TIMEOUT.
    if (deadLanes_ + 1 == lanes_.size()) {
      if (!l.stallWarned)
        WARN("NET/Socket: the last working lane of a send connection (%s) stalls: %s; no other lane to move to, "
             "waiting for it to come back (or for ACCL_TIMEOUT)", laneName(l.fd).c_str(), why);
      l.stallWarned = true;
      continue;
    }
    if (!failLane(i, acked, why)) return false;
  }
  return true;
}

// Lane i, given up: once its peer acknowledged all it was given, its
// connection stands and its interface is up (and it has been out rejoinUs_),
// a rejoin notice goes; once the peer's byte comes back on it, it carries
// frames again. A socket that failed outright stays out.
void SocketStream::watchDeadLane(size_t i, uint64_t now) {
  Lane& l = lanes_[i];
  if (l.gone) return;
  if (!l.rejoining) {
    if (now - l.deadUs < rejoinUs_ || l.gen + 1 >= kMaxGenerations || unacked(l.fd) != 0 || !established(l.fd) ||
        localLinkDown(l.fd))
      return;
    ++l.gen;
    Lane* to = sendNotices(notice(kRejoinOffset, i, l.gen, l.bytes), nullptr);
    if (!to) return;
    l.rejoining = true;
    INFO(kNet, "NET/Socket: lane %zu of a send connection (%s) works again (all %llu bytes it was given arrived); "
         "asking the peer to take it back (over %s)", i, laneName(l.fd).c_str(),
         static_cast<unsigned long long>(l.bytes), laneName(to->fd).c_str());
    return;
  }
  char byte;
  const ssize_t k = recv(l.fd, &byte, 1, MSG_DONTWAIT);
  if (k < 0 && socketWouldBlock()) return;
  if (k != 1) {
    l.gone = true;
    return;
  }
  l.dead = l.rejoining = false;
  --deadLanes_;
  ++rejoins_;
  retryOften(l.fd, false, l.rtoMaxMs);
  // The peer read every notice of this lane before its byte came: none need go again.
  noticesSent_.erase(std::remove_if(noticesSent_.begin(), noticesSent_.end(),
                                    [&](const Frame& f) { return (f.total & 0xffffu) == i; }),
                     noticesSent_.end());
  l.ackedAt = l.bytes;
  l.stillUs = now;
  l.seenUs = 0;
  l.rate = 0;
  sizeLane(l, 2 * kLaneBufferBytes);
  WARN("NET/Socket: lane %zu of %zu of a send connection (%s) carries again, %llu ms after it was given up",
       i, lanes_.size(), laneName(l.fd).c_str(), static_cast<unsigned long long>((now - l.deadUs) / 1000));
}

// Whether a lane that does not stand by is live (else the standby lanes carry).
bool SocketStream::primaryLive() const {
  return std::any_of(lanes_.begin(), lanes_.end(), [](const Lane& l) { return !l.dead && !l.standby; });
}

// Every notice sent so far, then `last`, then the frames `after` (if any),
// go over the live lane with the fewest bytes unacknowledged: a notice whose
// lane's peer acknowledged it may not have been read yet, and what follows
// must not be read before it. Null: no lane is live.
SocketStream::Lane* SocketStream::sendNotices(const Frame& last, std::deque<Held>* after) {
  Lane* to = nullptr;
  size_t least = SIZE_MAX;
  const bool standing = primaryLive();
  for (Lane& o : lanes_) {
    if (o.dead || (o.standby && standing)) continue;
    const size_t queued = unacked(o.fd);
    if (queued < least) {
      least = queued;
      to = &o;
    }
  }
  if (!to) return nullptr;
  noticesSent_.push_back(last);
  for (const Frame& c : noticesSent_) {
    Held h;
    h.head = c;
    to->loose.push_back(std::move(h));
  }
  if (after)
    for (Held& h : *after) to->loose.push_back(std::move(h));
  return to;
}

bool SocketStream::failLaneForTest(size_t lane, double share) {
  if (!failover_ || lane >= lanes_.size() || lanes_[lane].dead) return false;
  const Lane& l = lanes_[lane];
  const uint64_t oldest = l.held.empty() ? l.bytes : l.held.front().at;
  const double s = std::min(std::max(share, 0.0), 1.0);
  if (failLane(lane, oldest + static_cast<uint64_t>(s * static_cast<double>(l.bytes - oldest)), "a test gave it up"))
    return true;
  std::lock_guard<std::mutex> lock(mu_);
  broken_ = true;  // as moveSend's failure makes it
  return false;
}

// Gives lane i up, its peer having `acked` of its bytes: the frame it was
// writing counts as moved (its copy goes again), and a cut ("lane i ends at
// acked"), then every held frame the peer lacks (the unacknowledged tail of
// the one that straddles the cut) and the lane's loose frames, go in order
// over the live lane with the fewest bytes unacknowledged. False: none is left.
bool SocketStream::failLane(size_t i, uint64_t acked, const char* why) {
  Lane& l = lanes_[i];
  if (l.writing && l.req) finished(l.req, l.head.len);
  l.req = nullptr;
  l.writing = false;
  l.blocked = false;
  l.dead = true;
  l.deadUs = nowUs();
  ++deadLanes_;
  retryOften(l.fd, true, l.rtoMaxMs);
  std::deque<Held> again;
  size_t bytes = 0;
  for (Held& h : l.held) {
    const uint64_t payloadAt = h.at + sizeof(Frame), end = payloadAt + h.head.len;
    if (end <= acked || isNotice(h.head)) continue;  // the peer has it all; notices go first anyway
    const uint32_t had = acked > payloadAt ? static_cast<uint32_t>(acked - payloadAt) : 0;
    h.head.offset += had;
    h.head.len -= had;
    h.payload += had;
    bytes += h.head.len;
    again.push_back(std::move(h));
  }
  for (Held& h : l.loose) {
    if (isNotice(h.head)) continue;
    bytes += h.head.len;
    again.push_back(std::move(h));
  }
  l.held.clear();
  l.loose.clear();
  const Lane* to = sendNotices(notice(kCutOffset, i, l.gen, acked), &again);
  if (!to) {
    WARN("NET/Socket: the last lane of a send connection (%s) failed: %s; no lane is left to carry it",
         laneName(l.fd).c_str(), why);
    return false;
  }
  WARN("NET/Socket: lane %zu of %zu of a send connection (%s) failed: %s; its %zu bytes the peer lacks go again "
       "over lane %zu (%s)", i, lanes_.size(), laneName(l.fd).c_str(), why, bytes,
       static_cast<size_t>(to - lanes_.data()), laneName(to->fd).c_str());
  return true;
}

// Writes the frame lane l carries as far as the kernel takes it; blocked
// where it would not take all. False: the lane broke.
bool SocketStream::writeFrame(Lane& l) {
  constexpr size_t hb = sizeof(Frame);
  iovec iov[2];
  int n = 0;
  if (l.moved < hb) iov[n++] = {reinterpret_cast<char*>(&l.head) + l.moved, hb - l.moved};
  const size_t off = l.moved > hb ? l.moved - hb : 0;
  if (l.head.len > off) iov[n++] = {const_cast<char*>(l.src) + off, l.head.len - off};
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = n;
  const ssize_t k = sendmsg(l.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (k < 0) {
    if (!socketWouldBlock()) return false;
    l.blocked = true;
    return true;
  }
  l.moved += static_cast<size_t>(k);
  l.bytes += static_cast<uint64_t>(k);
  if (l.moved < hb + l.head.len) {  // the kernel took a part: it has no room now
    l.blocked = true;
    return true;
  }
  l.writing = false;
  Request* r = l.req;
  l.req = nullptr;
  if (r) finished(r, l.head.len);
  return true;
}

// The posted message numbered `seq` (null: not posted yet, or done). Under mu_.
SocketStream::Request* SocketStream::posted(uint32_t seq) {
  for (Request* r : queue_)
    if (r->seq == seq) return r;
  return nullptr;
}

bool SocketStream::moveRecv(size_t begin, size_t end) {
  pollfd p[kMaxLanes];
  Lane* which[kMaxLanes];
  int n = 0;
  for (size_t i = begin; i < end; ++i) {
    Lane& l = lanes_[i];
    if (!recvBlocked(l) && !l.eof && n < kMaxLanes) {  // a cut lane too: its bytes past the cut are dropped
      p[n] = {l.fd, POLLIN, 0};
      which[n++] = &l;
    }
  }
  if (n == 0) return true;
  if (n == 1) return readLane(*which[0]);  // one: its recv says as much as a poll would
  if (poll(p, n, 0) <= 0) return true;
  for (int i = 0; i < n; ++i)
    if (p[i].revents && !readLane(*which[i])) return false;
  return true;
}

// Whether frame h can go into request r (else a WARN: the peer is broken).
bool SocketStream::fits(const Frame& h, const Request* r) const {
  if (h.tag == r->tag && h.total <= r->size && (!r->framed || h.total == r->total) &&
      uint64_t{h.offset} + h.len <= h.total)
    return true;
  WARN("NET/Socket: a frame (message %u, tag %u, %u bytes in all, %u at %u) came where its message takes tag %u "
       "and at most %zu bytes", h.seq, h.tag, h.total, h.len, h.offset, r->tag, r->size);
  return false;
}

// A frame that came before its message was posted, now that it is (r): r
// counts it, and once all of it is here its bytes go into place. Under mu_.
bool SocketStream::claim(std::list<Staged>::iterator s, Request* r) {
  if (!s->counted) {
    if (!fits(s->head, r)) return false;
    r->total = s->head.total;
    r->framed = true;
    ++r->frames;
    s->counted = true;
  }
  if (!s->full) return true;
  if (s->head.len) memcpy(r->data + s->head.offset, s->data.get(), s->head.len);
  r->moved += s->head.len;
  --r->frames;
  stagedBytes_ -= s->head.len;
  staged_.erase(s);
  return true;
}

// How many of `want` bytes lane l may read now: all, or those before its cut.
size_t SocketStream::readable(const Lane& l, size_t want) const {
  return l.cutAt == UINT64_MAX ? want : static_cast<size_t>(std::min<uint64_t>(want, l.cutAt - l.wire));
}

// A notice: lane L ends at byte A (a cut), or goes on at byte W (a rejoin).
// A cut where the lane has read that far already ends it now; else once it
// has (the bytes are in its kernel). Notices of an earlier generation, or
// known already, were sent again: nothing to do.
bool SocketStream::readNotice(const Frame& h) {
  const uint64_t at = (uint64_t{h.tag} << 32) | h.seq;
  const size_t lane = h.total & 0xffffu;
  const uint32_t gen = h.total >> 16;
  if (lane >= lanes_.size() || !helpers_.empty()) {
    WARN("NET/Socket: a notice for lane %zu came (%zu lanes%s)", lane, lanes_.size(),
         helpers_.empty() ? "" : ", moved by helper threads, which cannot take it");
    return false;
  }
  Lane& k = lanes_[lane];
  if (h.offset == kRejoinOffset) return readRejoin(k, gen, at);
  if (gen > k.gen) {
    WARN("NET/Socket: a cut of lane %zu's generation %u came before it was taken back (generation %u)", lane, gen,
         k.gen);
    return false;
  }
  if (gen < k.gen || k.dead || k.cutAt != UINT64_MAX) return true;  // sent again: known
  {
    std::lock_guard<std::mutex> lock(mu_);
    cuts_ = true;
  }
  k.cutAt = at;
  return k.wire >= at ? cutLane(k) : true;
}

// Lane k, cut, goes on at byte `at` (generation `gen`): once it is read up
// to its cut, the bytes up to `at` are dropped and frames read from there;
// one byte back on it tells the sender so.
bool SocketStream::readRejoin(Lane& k, uint32_t gen, uint64_t at) {
  if (gen <= k.gen) return true;  // sent again: known
  if (gen != k.gen + 1 || (!k.dead && k.cutAt == UINT64_MAX) || at < k.wire) {
    WARN("NET/Socket: lane %zu was taken back (generation %u, at byte %llu) where it was not cut (generation %u, "
         "%llu bytes read)", static_cast<size_t>(&k - lanes_.data()), gen, static_cast<unsigned long long>(at), k.gen,
         static_cast<unsigned long long>(k.wire));
    return false;
  }
  k.gen = gen;
  if (k.eof) return true;  // it ended while cut: never taken back (no byte goes back)
  if (!k.dead) {
    k.resumeAt = at;  // cutLane goes on from there, once the lane reached its cut
    return true;
  }
  {  // read up to its cut already: on from here
    std::lock_guard<std::mutex> lock(mu_);
    k.dead = false;
    k.cutAt = UINT64_MAX;
    --eofLanes_;
  }
  resume(k, at);
  return true;
}

// Lane l, read up to its cut, goes on at byte `at`: what lies before is
// dropped, frames are read from there, and one byte back tells the sender
// (only now: until the lane reached its cut, the sender must not cut it
// again, and it cannot while it waits for the byte). Until a byte past
// `at` came, an error or end on it ends the lane, nothing more: the sender
// may have closed it without taking it back.
void SocketStream::resume(Lane& l, uint64_t at) {
  l.skipTo = at;
  l.resumeAt = UINT64_MAX;
  l.untried = true;
  const char byte = 1;
  (void)!send(l.fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);  // where it fails the sender never takes it back
}

// Lane l, taken back, ended or failed before a byte past its rejoin point
// came: it ends (true); any other lane's failure breaks the stream (false).
bool SocketStream::endUntried(Lane& l) {
  if (!l.untried) return false;
  l.untried = false;
  l.dead = l.eof = true;
  l.skipTo = UINT64_MAX;
  std::lock_guard<std::mutex> lock(mu_);
  ++eofLanes_;
  return true;
}

// Lane l, cut and read up to its cut: what else comes on it went again
// elsewhere, and is dropped (else the peer's kernel, its buffer full, would
// hold it unacknowledged, and the lane could never be taken back). Its
// closing ends it.
bool SocketStream::dropCut(Lane& l) {
  if (!sink_) sink_.reset(new char[kSinkBytes]);
  for (;;) {
    const ssize_t k = recv(l.fd, sink_.get(), kSinkBytes, MSG_DONTWAIT);
    if (k <= 0) {  // closed or broken: it ends (counted among the ended lanes when it was cut)
      if (k == 0 || !socketWouldBlock()) l.eof = true;
      return true;
    }
    l.wire += static_cast<uint64_t>(k);
  }
}

// Lane l, taken back: drops its bytes up to l.skipTo (what its sender gave
// it before it was given up, sent again elsewhere). False: it broke.
bool SocketStream::skip(Lane& l) {
  if (!sink_) sink_.reset(new char[kSinkBytes]);
  while (l.wire < l.skipTo) {
    const ssize_t k = recv(l.fd, sink_.get(), std::min<uint64_t>(l.skipTo - l.wire, kSinkBytes), MSG_DONTWAIT);
    if (k == 0) return endUntried(l);
    if (k < 0) return socketWouldBlock() || endUntried(l);
    l.wire += static_cast<uint64_t>(k);
  }
  l.skipTo = UINT64_MAX;
  return true;
}

// Lane l ends at its cut A, having read P >= A bytes: the frame it was
// reading keeps what lay before A; frames it read whole past A give back the
// bytes past A (they come again, each counted once); what follows is
// dropped, up to where it is taken back if it is. False: the cut fell where
// it no longer knows its frames.
bool SocketStream::cutLane(Lane& l) {
  constexpr uint64_t hb = sizeof(Frame);
  const uint64_t cut = l.cutAt, read = l.wire;
  const uint64_t current = l.moved ? read - l.moved : read;  // the frame begun, if any
  std::lock_guard<std::mutex> lock(mu_);
  if (l.moved >= hb && (l.req || l.staging)) {
    const uint64_t payloadAt = current + hb;
    const uint32_t keep = cut > payloadAt ? static_cast<uint32_t>(std::min<uint64_t>(cut - payloadAt, l.moved - hb)) : 0;
    if (l.req) {
      l.req->moved += keep;
      --l.req->frames;
      if (l.req->complete()) signalDone();
    } else {
      Staged& st = *l.stage;
      stagedBytes_ -= st.head.len - keep;
      st.head.len = keep;
      st.full = true;
      Request* r = st.counted ? posted(st.head.seq) : nullptr;
      if (r && !claim(l.stage, r)) return false;
      if (!r && keep == 0) staged_.erase(l.stage);  // nothing of it came: it comes again whole
    }
  }
  l.req = nullptr;
  l.staging = false;
  l.discarding = false;
  l.blocked = false;  // its next frame, waiting for a post, is past the cut
  l.moved = 0;
  if (l.resumeAt != UINT64_MAX) {  // taken back already: on from there
    l.cutAt = UINT64_MAX;
    resume(l, l.resumeAt);
  } else {
    l.dead = true;
    if (!l.eof) ++eofLanes_;
  }
  if (current > cut) {  // whole frames read past the cut (else nothing to give back)
    if (l.seen.empty() || l.seen.front().at > cut) {
      WARN("NET/Socket: lane %zu was cut at byte %llu, before the frames it remembers", &l - lanes_.data(),
           static_cast<unsigned long long>(cut));
      return false;
    }
    for (const Seen& e : l.seen) {
      if (e.at >= current) break;  // the frame in progress: done above
      const uint64_t payloadAt = e.at + hb, end = payloadAt + e.head.len;
      if (end <= cut || isNotice(e.head)) continue;
      const uint32_t over = static_cast<uint32_t>(end - std::max(cut, payloadAt));
      if (Request* r = posted(e.head.seq)) {
        r->moved -= over;
        continue;
      }
      for (auto st = staged_.begin(); st != staged_.end(); ++st)
        if (st->head.seq == e.head.seq && st->head.offset == e.head.offset && st->full && !st->counted) {
          st->head.len -= over;
          stagedBytes_ -= over;
          if (st->head.len == 0) staged_.erase(st);  // it comes again whole
          break;
        }
    }
  }
  l.seen.clear();
  return true;
}

// Reads lane l's frames into their messages until it has no more now, or a
// frame completes a message (its waiter goes on; what follows, at the next
// call). A frame whose message is not posted yet goes into a buffer of the
// stream's (up to kStageBytes in all), so that a lane ahead of the others
// keeps moving; past that the lane waits for a post (blocked). A lane with a
// cut reads up to it. False: it broke, or it carried what no request can
// take. The system calls run outside mu_, the bookkeeping inside.
bool SocketStream::readLane(Lane& l) {
  constexpr size_t hb = sizeof(Frame);
  for (;;) {
    if (l.dead) return dropCut(l);
    if (l.wire == l.cutAt) {
      if (!cutLane(l)) return false;
      continue;
    }
    if (l.skipTo != UINT64_MAX) {
      if (!skip(l)) return false;
      if (l.dead || l.skipTo != UINT64_MAX) return true;  // ended, or more to come
      continue;  // a cut may fall right where it goes on
    }
    if (l.moved < hb) {
      const ssize_t k =
          recv(l.fd, reinterpret_cast<char*>(&l.head) + l.moved, readable(l, hb - l.moved), MSG_DONTWAIT);
      if (k == 0 && l.moved == 0 && l.cutAt == UINT64_MAX) {  // closed between frames: the others may still hold some
        l.eof = true;
        std::lock_guard<std::mutex> lock(mu_);
        ++eofLanes_;
        return true;
      }
      if (k == 0) return endUntried(l);  // closed mid-frame, or before its cut
      if (k < 0) return socketWouldBlock() || endUntried(l);
      l.untried = false;
      l.moved += static_cast<size_t>(k);
      l.wire += static_cast<uint64_t>(k);
      if (l.moved < hb) continue;
      if (isNotice(l.head)) {
        l.moved = 0;
        if (lanes_.size() > 1) l.seen.push_back({l.wire - hb, l.head});
        if (!readNotice(l.head)) return false;
        continue;
      }
      if (lanes_.size() > 1) {  // where a cut may fall
        l.seen.push_back({l.wire - hb, l.head});
        while (l.seen.size() > kSeenFrames || (l.seen.size() > 1 && l.wire - l.seen[1].at > kSeenBytes))
          l.seen.pop_front();
      }
      if (l.wire == l.cutAt) {  // the cut falls right after this head: none of its payload
        if (!cutLane(l)) return false;
        continue;
      }
    }
    const Frame& h = l.head;
    if (!l.req && !l.staging && !l.discarding) {
      std::lock_guard<std::mutex> lock(mu_);
      Request* r = posted(h.seq);
      if (!r && h.seq - nextSeq_ >= (1u << 31)) {
        if (!cuts_) {
          WARN("NET/Socket: a frame of message %u came, which is complete (the next to be posted is %u)", h.seq,
               nextSeq_);
          return false;
        }
        l.discarding = true;  // sent again after a cut, and here already: read and dropped
        if (!sink_) sink_.reset(new char[kSinkBytes]);
      } else if (r) {
        if (!fits(h, r)) return false;
        r->total = h.total;
        r->framed = true;
        ++r->frames;
        l.req = r;
      } else if (stagedBytes_ + h.len <= kStageBytes) {  // ahead of the posts: into a buffer
        staged_.push_back(Staged{h, std::unique_ptr<char[]>(new char[std::max<size_t>(h.len, 1)])});
        stagedBytes_ += h.len;
        maxStaged_ = std::max(maxStaged_, stagedBytes_);
        l.stage = std::prev(staged_.end());
        l.staging = true;
      } else {  // a post unblocks it
        l.blocked = true;
        l.blockedAt = posts_.load();
        return true;
      }
    }
    const size_t end = hb + h.len;
    if (l.moved < end) {
      const size_t at = l.moved - hb;
      char* to = l.discarding ? sink_.get() : l.staging ? l.stage->data.get() + at : l.req->data + h.offset + at;
      const size_t want = l.discarding ? std::min(end - l.moved, kSinkBytes) : end - l.moved;
      const ssize_t k = recv(l.fd, to, readable(l, want), MSG_DONTWAIT);
      if (k == 0) return false;
      if (k < 0) return socketWouldBlock();
      l.moved += static_cast<size_t>(k);
      l.wire += static_cast<uint64_t>(k);
      l.bytes += static_cast<uint64_t>(k);
      if (l.moved < end) continue;
    }
    l.moved = 0;
    if (l.discarding) {
      l.discarding = false;
      continue;
    }
    if (l.staging) {
      l.staging = false;
      bool complete = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        l.stage->full = true;
        Request* r = l.stage->counted ? posted(h.seq) : nullptr;  // posted while its bytes came
        if (r && !claim(l.stage, r)) return false;
        complete = r && r->complete();
      }
      if (complete) signalDone();
      continue;
    }
    Request* r = l.req;
    l.req = nullptr;
    bool complete;
    {
      std::lock_guard<std::mutex> lock(mu_);
      r->moved += h.len;
      --r->frames;
      complete = r->complete();
    }
    if (complete) {
      signalDone();
      return true;
    }
  }
}

}  // namespace accl
