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

#include <algorithm>
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

// Messages of every kind of frame: empty, small, one frame, several.
std::vector<size_t> mixed(size_t n) {
  std::vector<size_t> s;
  for (size_t m = 0; m < n; ++m) s.push_back(m % 5 == 0 ? 0 : m % 5 == 1 ? 1000 : (m % 5) * 150000);
  return s;
}

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

  bool endless = false;  // messages are added as the sender runs out

  Run(int lanes, const std::vector<size_t>& s, const std::vector<bool>& standby = {}) {
    std::vector<int> a, b;
    CHECK(tcpLanes(lanes, &a, &b));
    tx = new SocketStream(a, true, true, standby);
    rx = new SocketStream(b, false);
    add(s);
  }
  void add(const std::vector<size_t>& s) {
    for (size_t size : s) {
      const size_t m = sizes.size();
      sizes.push_back(size);
      out.emplace_back(size);
      for (size_t i = 0; i < size; ++i) out[m][i] = pattern(m, i);
      in.emplace_back(size + 1, 0);
    }
    sends.resize(sizes.size(), nullptr);
    recvs.resize(sizes.size(), nullptr);
  }
  ~Run() {
    delete tx;
    delete rx;
  }
  // One side's turn: posts while it may, then tests its oldest request.
  void side(int k, bool move) {
    if (endless && !k && posted[0] + 8 > sizes.size()) add(mixed(40));
    SocketStream* st = k ? rx : tx;
    std::vector<void*>& reqs = k ? recvs : sends;
    while (posted[k] < sizes.size() && posted[k] - done[k] < 8) {
      void* r = nullptr;
      char* data = k ? in[posted[k]].data() : out[posted[k]].data();
      if (st->post(data, k ? sizes[posted[k]] + 1 : sizes[posted[k]], 3, &r) != ncclSuccess || !r) break;
      reqs[posted[k]++] = r;
    }
    if (move && !k && done[k] == posted[k]) tx->progress();  // as the transport does with nothing outstanding
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

namespace {

// A receiving stream over `lanes` TCP lanes whose sending ends a test writes
// by hand: frames in the order a sender's failover could produce them.
struct HandPeer {
  std::vector<int> tx, rx;
  SocketStream* stream = nullptr;
  explicit HandPeer(int lanes) {
    CHECK(tcpLanes(lanes, &tx, &rx));
    stream = new SocketStream(rx, false);
  }
  ~HandPeer() {
    delete stream;
    for (int fd : tx) close(fd);
  }
  void frame(int lane, uint32_t seq, uint32_t total, uint32_t offset, uint32_t len, char fill) {
    const uint32_t head[5] = {seq, 3, total, offset, len};
    std::vector<char> p(len, fill);
    CHECK(write(tx[lane], head, sizeof(head)) == static_cast<ssize_t>(sizeof(head)));
    if (len) CHECK(write(tx[lane], p.data(), len) == static_cast<ssize_t>(len));
  }
  void head(int lane, uint32_t seq, uint32_t total, uint32_t offset, uint32_t len) {
    const uint32_t h[5] = {seq, 3, total, offset, len};
    CHECK(write(tx[lane], h, sizeof(h)) == static_cast<ssize_t>(sizeof(h)));
  }
  void cut(int lane, uint32_t cutLane, uint64_t at, uint32_t gen = 0) { notice(lane, 0xffffffffu, cutLane, gen, at); }
  void rejoin(int lane, uint32_t k, uint32_t gen, uint64_t at) { notice(lane, 0xfffffffeu, k, gen, at); }
  void notice(int lane, uint32_t kind, uint32_t k, uint32_t gen, uint64_t at) {
    const uint32_t h[5] = {static_cast<uint32_t>(at), static_cast<uint32_t>(at >> 32), k | (gen << 16), kind, 0};
    CHECK(write(tx[lane], h, sizeof(h)) == static_cast<ssize_t>(sizeof(h)));
  }
  // Whether the receiver's byte (it took lane k back) came, within `ms`.
  bool backOn(int k, int ms = 100) {
    char b = 0;
    for (int i = 0; i < ms; ++i, usleep(1000))
      if (recv(tx[k], &b, 1, MSG_DONTWAIT) == 1) return b == 1;
    return false;
  }
  // Tests r for `ms` (it moves the lanes): the result, *done.
  ncclResult_t wait(void* r, int* done, int ms = 300) {
    size_t n = 0;
    ncclResult_t res = ncclSuccess;
    *done = 0;
    for (auto end = Clock::now() + std::chrono::milliseconds(ms); res == ncclSuccess && !*done && Clock::now() < end;)
      res = SocketStream::test(r, done, &n);
    return res;
  }
};

}  // namespace

TEST(failover_a_cut_right_after_a_head) {
  // Lane 1 got message 0's head acknowledged, not its payload: the cut falls
  // where the payload begins. The receiver takes none of it from lane 1 and
  // all of it from lane 0, where it comes again.
  HandPeer p(2);
  p.head(1, 0, 100, 0, 100);
  p.cut(0, 1, 20);
  p.frame(0, 0, 100, 0, 100, 'a');
  p.frame(0, 1, 100, 0, 100, 'b');
  std::vector<char> m0(100, 0), m1(100, 0);
  void *r0 = nullptr, *r1 = nullptr;
  CHECK_EQ(p.stream->post(m0.data(), 100, 3, &r0), ncclSuccess);
  CHECK_EQ(p.stream->post(m1.data(), 100, 3, &r1), ncclSuccess);
  int done = 0;
  CHECK_EQ(p.wait(r0, &done), ncclSuccess);
  CHECK(done);
  CHECK_EQ(p.wait(r1, &done), ncclSuccess);
  CHECK(done);
  CHECK(m0 == std::vector<char>(100, 'a') && m1 == std::vector<char>(100, 'b'));
}

TEST(failover_cuts_go_again_before_their_frames) {
  // Lanes m = 0, j = 1, to = 2. Lane j carried the first half of message 0
  // (the receiver read it; only 20 bytes were acknowledged); its cut went
  // over lane `to`, after message 1; `to` failed with that cut acknowledged
  // but not read. Lane m carries every cut again, then the half once more:
  // the receiver reads m first and must count that half once (a message of
  // 200 bytes is not complete with 100 of them twice), then the second half.
  HandPeer p(3);
  std::vector<char> m0(200, 0), m1(10, 0);
  void *r0 = nullptr, *r1 = nullptr;
  CHECK_EQ(p.stream->post(m0.data(), 200, 3, &r0), ncclSuccess);
  CHECK_EQ(p.stream->post(m1.data(), 10, 3, &r1), ncclSuccess);
  p.frame(1, 0, 200, 0, 100, 'x');
  int done = 0;
  CHECK_EQ(p.wait(r0, &done, 100), ncclSuccess);
  CHECK(!done);
  p.frame(2, 1, 10, 0, 10, 'y');
  p.cut(2, 1, 20);
  p.cut(0, 1, 20);  // every cut so far, then this one
  p.cut(0, 2, 50);
  p.frame(0, 0, 200, 0, 100, 'x');
  CHECK_EQ(p.wait(r0, &done, 200), ncclSuccess);
  CHECK(!done);  // half of it, counted once
  p.frame(0, 0, 200, 100, 100, 'z');
  CHECK_EQ(p.wait(r0, &done), ncclSuccess);
  CHECK(done);
  CHECK_EQ(p.wait(r1, &done), ncclSuccess);
  CHECK(done);
  CHECK(std::equal(m0.begin(), m0.begin() + 100, std::vector<char>(100, 'x').begin()) &&
        std::equal(m0.begin() + 100, m0.end(), std::vector<char>(100, 'z').begin()));
  CHECK(m1 == std::vector<char>(10, 'y'));
}

TEST(failover_a_staged_frame_cut_twice) {
  // Message 1's frame arrives on lane j before message 1 is posted (staged),
  // past a cut at its head; it comes again on lane `to` (staged again), which
  // is cut at that frame's head too; the third copy on lane m is the one.
  HandPeer p(3);
  std::vector<char> z(8, 0), m1(100, 0);
  void *r0 = nullptr, *r1 = nullptr;
  CHECK_EQ(p.stream->post(z.data(), 8, 3, &r0), ncclSuccess);  // message 0, still to come
  p.frame(1, 1, 100, 0, 100, 'q');
  int done = 0;
  CHECK_EQ(p.wait(r0, &done, 50), ncclSuccess);
  p.cut(2, 1, 20);
  p.frame(2, 1, 100, 0, 100, 'q');
  CHECK_EQ(p.wait(r0, &done, 50), ncclSuccess);
  p.cut(0, 1, 20);
  p.cut(0, 2, 40);
  p.frame(0, 1, 100, 0, 100, 'q');
  p.frame(0, 0, 8, 0, 8, 'r');
  CHECK_EQ(p.wait(r0, &done), ncclSuccess);
  CHECK(done);
  CHECK_EQ(p.stream->post(m1.data(), 100, 3, &r1), ncclSuccess);
  CHECK_EQ(p.wait(r1, &done), ncclSuccess);
  CHECK(done);
  CHECK(m1 == std::vector<char>(100, 'q') && z == std::vector<char>(8, 'r'));
  CHECK_EQ(p.stream->stagedBytes(), 0u);
}

TEST(failover_a_lane_given_up_is_taken_back) {
  // Lane 1 is given up mid-stream (ahead of the receiver, or behind what it
  // read), works (loopback), and is taken back once the receiver's byte
  // comes: it carries frames again, every message exact. Then it goes a
  // second time (generation 1) and comes back again.
  for (bool hold : {false, true}) for (double share : {0.0, 0.6}) {
    Run r(3, mixed(40));
    r.endless = true;
    r.tx->rejoinAfterForTest(20000);
    if (hold) r.tx->holdForTest();
    CHECK(r.until([&] { return r.done[1] >= 8; }));
    if (hold) r.until([] { return false; }, false, true, 100);  // the receiver reads ahead of the cut
    CHECK(r.tx->failLaneForTest(1, share));
    for (int round = 1; round <= 2; ++round) {
      const uint64_t before = r.tx->laneBytes(1);
      CHECK(r.until([&] { return r.tx->rejoins() == round; }));
      CHECK_EQ(r.tx->deadLanes(), 0);
      CHECK(r.until([&] { return r.tx->laneBytes(1) > before + (1 << 20); }));  // carries again
      if (round == 1) CHECK(r.tx->failLaneForTest(1, 0.5));
    }
    r.endless = false;
    CHECK(r.all());
    CHECK(r.exact());
  }
}

TEST(failover_another_lane_cut_after_a_return_sends_old_notices_again) {
  // Lane 0 is given up and taken back; then lane 2 goes: every notice so far
  // (lane 0's cut and rejoin, of generation 0 and 1) goes again before lane
  // 2's cut. The receiver knows them: lane 0 is not cut a second time.
  Run r(3, mixed(40));
  r.endless = true;
  r.tx->rejoinAfterForTest(10000);
  CHECK(r.until([&] { return r.done[1] >= 8; }));
  CHECK(r.tx->failLaneForTest(0, 1.0));  // cut where it was given all: the cut and the rejoin at one byte
  CHECK(r.until([&] { return r.tx->rejoins() == 1; }));
  CHECK(r.tx->failLaneForTest(2, 0.3));
  const uint64_t before = r.tx->laneBytes(0);
  CHECK(r.until([&] { return r.tx->laneBytes(0) > before + (2 << 20); }));
  r.endless = false;
  CHECK(r.all());
  CHECK(r.exact());
}

TEST(failover_a_rejoin_read_before_the_lane_reached_its_cut) {
  // By hand: lane 1 carries message 0 (half of it is past the cut at 20 +
  // 50); the cut and the rejoin at its end (W) come on lane 0 before the
  // receiver reads lane 1. It reads lane 1 up to the cut, skips to W, sends
  // its byte back, and reads message 1 from lane 1 after W.
  HandPeer p(2);
  std::vector<char> m0(100, 0), m1(30, 0);
  void *r0 = nullptr, *r1 = nullptr;
  CHECK_EQ(p.stream->post(m0.data(), 100, 3, &r0), ncclSuccess);
  CHECK_EQ(p.stream->post(m1.data(), 30, 3, &r1), ncclSuccess);
  p.cut(0, 1, 20 + 50);
  p.rejoin(0, 1, 1, 20 + 100);
  p.frame(0, 0, 100, 50, 50, 'b');
  int done = 0;
  CHECK_EQ(p.wait(r0, &done, 100), ncclSuccess);
  CHECK(!done);
  CHECK(!p.backOn(1, 20));  // not before lane 1 reached its cut: the sender must not cut it again meanwhile
  p.frame(1, 0, 100, 0, 100, 'a');  // what lane 1 carried before it was given up (past the cut: 'a' must not count)
  CHECK_EQ(p.wait(r0, &done), ncclSuccess);
  CHECK(done);
  CHECK(p.backOn(1));
  p.frame(1, 1, 30, 0, 30, 'c');
  CHECK_EQ(p.wait(r1, &done), ncclSuccess);
  CHECK(done);
  CHECK(std::equal(m0.begin(), m0.begin() + 50, std::vector<char>(50, 'a').begin()) &&
        std::equal(m0.begin() + 50, m0.end(), std::vector<char>(50, 'b').begin()));
  CHECK(m1 == std::vector<char>(30, 'c'));
}

TEST(failover_standby_lanes_carry_only_while_the_others_are_out) {
  // Lanes 2 and 3 stand by (the next rail's ports): nothing goes on them
  // while lane 0 or 1 lives; both given up, they carry (exact); lane 0 back,
  // new frames leave them again.
  Run r(4, mixed(40), {false, false, true, true});
  r.endless = true;
  r.tx->rejoinAfterForTest(500000);
  CHECK(r.until([&] { return r.done[1] >= 20; }));
  CHECK(r.tx->laneBytes(2) == 0 && r.tx->laneBytes(3) == 0);
  CHECK(r.tx->failLaneForTest(0, 0.5));
  CHECK(r.until([&] { return r.done[1] >= 24; }));
  CHECK(r.tx->laneBytes(2) == 0 && r.tx->laneBytes(3) == 0);  // lane 1 alone
  CHECK(r.tx->failLaneForTest(1, 0.5));
  CHECK(r.until([&] { return r.tx->laneBytes(2) + r.tx->laneBytes(3) > (2u << 20); }));
  CHECK_EQ(r.tx->rejoins(), 0);
  CHECK(r.until([&] { return r.tx->rejoins() >= 1; }));
  r.until([] { return false; }, true, true, 50);  // frames begun on the standby lanes finish
  const uint64_t standby = r.tx->laneBytes(2) + r.tx->laneBytes(3);
  CHECK(r.until([&] { return r.tx->laneBytes(0) + r.tx->laneBytes(1) > (8u << 20); }));
  CHECK(r.tx->laneBytes(2) + r.tx->laneBytes(3) < standby + (1u << 20));  // at most what was held when it came back
  r.endless = false;
  CHECK(r.all());
  CHECK(r.exact());
}

namespace {

// Lane 1 carried message 0's head and first 50 bytes (lane bytes 0..70),
// then was cut at 70; its second half came on lane 0. Message 1 (30 bytes)
// is posted, still to come.
struct CutAt70 {
  HandPeer p{2};
  std::vector<char> m0 = std::vector<char>(100, 0), m1 = std::vector<char>(30, 0);
  void *r0 = nullptr, *r1 = nullptr;
  const std::vector<char> a = std::vector<char>(50, 'a');
  CutAt70() {
    CHECK_EQ(p.stream->post(m0.data(), 100, 3, &r0), ncclSuccess);
    CHECK_EQ(p.stream->post(m1.data(), 30, 3, &r1), ncclSuccess);
    p.head(1, 0, 100, 0, 100);
    CHECK(write(p.tx[1], a.data(), 50) == 50);
    p.cut(0, 1, 70);
    p.frame(0, 0, 100, 50, 50, 'b');
    int done = 0;
    CHECK_EQ(p.wait(r0, &done), ncclSuccess);
    CHECK(done);
  }
  // Message 1 comes whole on lane 0, and is exact.
  void lastOnLaneZero() {
    int done = 0;
    p.frame(0, 1, 30, 0, 30, 'c');
    CHECK_EQ(p.wait(r1, &done), ncclSuccess);
    CHECK(done);
    CHECK(m1 == std::vector<char>(30, 'c'));
  }
};

}  // namespace

TEST(failover_a_cut_at_the_rejoin_byte_while_skipping) {
  // Lane 1's rejoin (W = 120) comes before its bytes 70..120, then a new
  // cut right at 120 (taken back, nothing acknowledged since). Skipping
  // ends at 120, where the new cut ends the lane again: the message that
  // was past it comes over lane 0.
  CutAt70 c;
  c.p.cut(0, 1, 70);
  c.p.rejoin(0, 1, 1, 120);
  c.p.cut(0, 1, 120, 1);
  int done = 0;
  CHECK_EQ(c.p.wait(c.r1, &done, 100), ncclSuccess);
  CHECK(!done);
  CHECK(c.p.backOn(1));
  CHECK(write(c.p.tx[1], c.a.data(), 50) == 50);  // lane 1's bytes 70..120 (dropped)
  c.p.frame(1, 1, 30, 0, 30, 'x');                 // 120..170: past the new cut (dropped)
  CHECK_EQ(c.p.wait(c.r1, &done, 100), ncclSuccess);
  CHECK(!done);
  c.lastOnLaneZero();
}

TEST(failover_a_lane_reset_before_it_carried_again_ends_only_itself) {
  // Lane 1 is taken back (its byte goes back); the sender closes it with
  // that byte unread (its close came first): a reset. The receiver ends
  // lane 1 and goes on: message 1 comes whole on lane 0.
  CutAt70 c;
  c.p.cut(0, 1, 70);
  c.p.rejoin(0, 1, 1, 70);
  int done = 0;
  CHECK_EQ(c.p.wait(c.r1, &done, 100), ncclSuccess);
  usleep(20000);      // its byte is in lane 1's kernel, unread
  close(c.p.tx[1]);   // a socket closed with bytes unread resets its peer
  c.p.tx[1] = open("/dev/null", O_WRONLY);
  CHECK_EQ(c.p.wait(c.r1, &done, 100), ncclSuccess);
  c.lastOnLaneZero();
}
