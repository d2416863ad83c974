// Unit tests of the TCP backend's failover (net/socket_stream.h): a lane
// given up mid-stream, what its peer lacks sent again over the others, and
// every message exact wherever the cut falls against what the receiver had
// read (before it, behind it, a lane that carried a cut's frames cut too).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

#include "test_harness.h"

#include "net/socket_stream.h"

namespace {

using namespace accl;
using Clock = std::chrono::steady_clock;

// n TCP connections over loopback, in lane order: the sender's ends and the receiver's.
bool tcpLanes(int n, std::vector<int>* tx, std::vector<int>* rx) {
  const int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(lfd, n) != 0 ||
      getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return false;
  for (int i = 0; i < n; ++i) {
    const int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return false;
    const int s = accept(lfd, nullptr, nullptr);
    for (int fd : {c, s}) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    tx->push_back(c);
    rx->push_back(s);
  }
  close(lfd);
  return true;
}

char pattern(size_t msg, size_t i) { return static_cast<char>(i * 131 + msg * 7 + (i >> 12)); }

// A sender and a receiver stream over `lanes` lanes, one thread moving both:
// messages of `sizes`, at most 8 posted at a time on each side.
struct Run {
  SocketStream* tx = nullptr;
  SocketStream* rx = nullptr;
  std::vector<size_t> sizes;
  std::vector<std::vector<char>> out, in;
  std::vector<void*> sends, recvs;
  size_t posted[2] = {0, 0}, done[2] = {0, 0};
  bool failed = false;

  Run(int lanes, std::vector<size_t> s) : sizes(std::move(s)) {
    std::vector<int> a, b;
    CHECK(tcpLanes(lanes, &a, &b));
    tx = new SocketStream(a, true, true);
    rx = new SocketStream(b, false);
    for (size_t m = 0; m < sizes.size(); ++m) {
      out.emplace_back(sizes[m]);
      for (size_t i = 0; i < sizes[m]; ++i) out[m][i] = pattern(m, i);
      in.emplace_back(sizes[m] + 1, 0);
    }
    sends.assign(sizes.size(), nullptr);
    recvs.assign(sizes.size(), nullptr);
  }
  ~Run() {
    delete tx;
    delete rx;
  }
  // One side's turn: posts while it may, then tests its oldest request.
  void side(int k, bool move) {
    SocketStream* st = k ? rx : tx;
    std::vector<void*>& reqs = k ? recvs : sends;
    while (posted[k] < sizes.size() && posted[k] - done[k] < 8) {
      void* r = nullptr;
      char* data = k ? in[posted[k]].data() : out[posted[k]].data();
      if (st->post(data, k ? sizes[posted[k]] + 1 : sizes[posted[k]], 3, &r) != ncclSuccess || !r) break;
      reqs[posted[k]++] = r;
    }
    if (!move || done[k] == posted[k]) return;
    int ok = 0;
    size_t n = 0;
    if (SocketStream::test(reqs[done[k]], &ok, &n) != ncclSuccess) {
      failed = true;
      return;
    }
    if (!ok) return;
    if (n != sizes[done[k]]) failed = true;
    reqs[done[k]++] = nullptr;
  }
  // Moves the sender, the receiver or both until `until` holds (`ms` at most).
  bool until(const std::function<bool()>& until, bool sender = true, bool receiver = true, int ms = 5000) {
    for (auto end = Clock::now() + std::chrono::milliseconds(ms); !failed && !until() && Clock::now() < end;) {
      side(0, sender);
      side(1, receiver);
    }
    return !failed && until();
  }
  bool all() {
    return until([&] { return done[0] == sizes.size() && done[1] == sizes.size(); });
  }
  bool exact() const {
    for (size_t m = 0; m < sizes.size(); ++m)
      for (size_t i = 0; i < sizes[m]; ++i)
        if (in[m][i] != out[m][i]) {
          fprintf(stderr, "  message %zu differs at byte %zu\n", m, i);
          return false;
        }
    return true;
  }
};

// Messages of every kind of frame: empty, small, one frame, several.
std::vector<size_t> mixed(size_t n) {
  std::vector<size_t> s;
  for (size_t m = 0; m < n; ++m) s.push_back(m % 5 == 0 ? 0 : m % 5 == 1 ? 1000 : (m % 5) * 150000);
  return s;
}

}  // namespace

TEST(failover_a_cut_ahead_of_the_receiver) {
  // The receiver has read nothing of what the cut lane carried: it reads up
  // to the cut, not past it, and the rest comes over the other lanes.
  for (double share : {0.0, 0.5, 1.0}) {
    Run r(3, mixed(30));
    r.until([] { return false; }, true, false, 200);  // the sender alone, as far as the sockets take
    CHECK(r.done[0] >= 2 && r.done[1] == 0);
    CHECK(r.tx->failLaneForTest(1, share));
    CHECK(r.all());
    CHECK(r.exact());
    CHECK_EQ(r.tx->deadLanes(), 1);
  }
}

TEST(failover_a_cut_behind_what_the_receiver_read) {
  // Frames stay held as if no acknowledgement had come: the receiver read
  // them (some of their messages are complete and gone) before the cut says
  // the lane ends far behind. What it read past the cut counts once.
  // Large messages: the frames read past the cut are of messages not
  // complete yet, which give their bytes back; mixed ones: of messages
  // complete and gone, whose frames sent again are dropped.
  for (double share : {0.0, 0.3}) for (bool large : {true, false}) {
    Run r(3, large ? std::vector<size_t>(12, 2 << 20) : mixed(40));
    r.tx->holdForTest();
    CHECK(r.until([&] { return r.done[1] >= (large ? 3u : 12u); }));
    r.until([] { return false; }, false, true, 200);  // the receiver takes what is there
    CHECK(!r.failed);
    CHECK(r.tx->failLaneForTest(2, share));
    CHECK(r.all());
    CHECK(r.exact());
  }
}

TEST(failover_a_lane_that_carried_a_cut_is_cut_too) {
  Run r(3, mixed(40));
  r.tx->holdForTest();
  CHECK(r.until([&] { return r.done[0] >= 10; }));
  CHECK(r.tx->failLaneForTest(0, 0.2));
  r.until([] { return false; }, true, false, 100);
  bool another = false;  // whichever lane took lane 0's frames, or not: both others go in turn
  for (size_t k = 1; k < 3 && !another; ++k) another = r.tx->failLaneForTest(k, 0.1);
  CHECK(another);
  CHECK(r.all());
  CHECK(r.exact());
  CHECK_EQ(r.tx->deadLanes(), 2);
}

TEST(failover_the_last_lane_cannot_go) {
  Run r(2, mixed(10));
  CHECK(r.until([&] { return r.done[0] >= 2; }));
  CHECK(r.tx->failLaneForTest(0, 0.5));
  CHECK(!r.tx->failLaneForTest(1, 0.5));  // no lane left: the stream fails
  CHECK(!r.all());
  CHECK(r.failed);
}
