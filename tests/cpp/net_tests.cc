// Unit tests of the network layer's TCP backend (net/socket_net.cc), over
// loopback (the tests run with NCCL_SOCKET_IFNAME=lo).
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "test_harness.h"

#include "base/param.h"
#include "bootstrap/socket.h"
#include "net/net.h"
#include "net/socket_stream.h"
#include "plugin/nccl_net.h"

namespace {

using namespace accl;
using Clock = std::chrono::steady_clock;

struct Pair {
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

// connect and accept, called in turn as the set-up does, until both are there (5 s at most).
bool connectPair(NetBackend* b, const uint8_t* sendSecret, const uint8_t* recvSecret, Pair* p, int dev = 0) {
  alignas(8) char handle[kNetHandleBytes];
  if (b->listen(dev, recvSecret, handle, &p->listen) != ncclSuccess) return false;
  void* progress = nullptr;
  const auto until = Clock::now() + std::chrono::seconds(5);
  while ((!p->send || !p->recv) && Clock::now() < until) {
    if (!p->send && b->connect(dev, sendSecret, handle, &progress, &p->send) != ncclSuccess) return false;
    if (!p->recv && b->accept(p->listen, &p->recv) != ncclSuccess) return false;
  }
  if (progress) b->cancelConnect(progress);
  return p->send && p->recv;
}

void closePair(NetBackend* b, Pair* p) {
  if (p->send) b->closeSend(p->send);
  if (p->recv) b->closeRecv(p->recv);
  if (p->listen) b->closeListen(p->listen);
}

// Tests requests until each is done or one fails (5 s at most); the sizes moved.
bool finish(NetBackend* b, std::vector<void*> reqs, std::vector<size_t>* sizes) {
  sizes->assign(reqs.size(), SIZE_MAX);
  const auto until = Clock::now() + std::chrono::seconds(5);
  for (size_t left = reqs.size(); left > 0 && Clock::now() < until;)
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (!reqs[i]) continue;
      int done = 0;
      if (b->test(reqs[i], &done, &(*sizes)[i]) != ncclSuccess) return false;
      if (done) {
        reqs[i] = nullptr;
        --left;
      }
    }
  for (void* r : reqs)
    if (r) return false;
  return true;
}

const uint8_t kSecret[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

// Sockets per connection for the scope of a test (NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD).
struct Lanes {
  Lanes(int threads, int socks) {
    setenv("NCCL_SOCKET_NTHREADS", std::to_string(threads).c_str(), 1);
    setenv("NCCL_NSOCKS_PERTHREAD", std::to_string(socks).c_str(), 1);
    resetParams();
  }
  ~Lanes() {
    unsetenv("NCCL_SOCKET_NTHREADS");
    unsetenv("NCCL_NSOCKS_PERTHREAD");
    resetParams();
  }
};

char pattern(size_t msg, size_t i) { return static_cast<char>(i * 131 + msg * 7 + (i >> 12)); }

}  // namespace

TEST(net_socket_moves_messages_in_order) {
  NetBackend* b = socketBackend();
  CHECK(b->devices() >= 1);
  NetDeviceProps props;
  CHECK_EQ(b->properties(0, &props), ncclSuccess);
  CHECK_EQ(props.name, std::string("lo"));
  CHECK_EQ(props.ptrSupport, NCCL_PTR_HOST);
  Pair p;
  CHECK(connectPair(b, kSecret, kSecret, &p));
  const size_t sizes[] = {0, 1000, 1 << 20};
  std::vector<std::vector<char>> out, in;
  std::vector<void*> reqs;
  for (size_t n : sizes) {
    out.emplace_back(n);
    for (size_t i = 0; i < n; ++i) out.back()[i] = static_cast<char>(i * 7 + n);
    in.emplace_back(1 << 20, 0);
    void* r = nullptr;
    CHECK_EQ(b->irecv(p.recv, in.back().data(), in.back().size(), 5, nullptr, &r), ncclSuccess);
    reqs.push_back(r);
  }
  for (size_t k = 0; k < 3; ++k) {
    void* r = nullptr;
    CHECK_EQ(b->isend(p.send, out[k].data(), out[k].size(), 5, nullptr, &r), ncclSuccess);
    reqs.push_back(r);
  }
  std::vector<size_t> moved;
  CHECK(finish(b, reqs, &moved));
  for (size_t k = 0; k < 3; ++k) {
    CHECK_EQ(moved[k], sizes[k]);
    CHECK_EQ(moved[3 + k], sizes[k]);
    CHECK(memcmp(in[k].data(), out[k].data(), sizes[k]) == 0);
  }
  closePair(b, &p);
}

TEST(net_socket_refuses_strangers_and_wrong_secrets) {
  NetBackend* b = socketBackend();
  alignas(8) char handle[kNetHandleBytes];
  void* listen = nullptr;
  CHECK_EQ(b->listen(0, kSecret, handle, &listen), ncclSuccess);
  // A stranger who read the handle: it knows the address, not the secret; it
  // sends junk where the proof goes. (The handle: magic, NIC count, a byte
  // that says IPv6, two of padding, the nonce, then each NIC's IPv4 address
  // and port.)
  SockAddr addr{};
  uint16_t port;
  CHECK_EQ(static_cast<int>(handle[4]), 1);  // one NIC
  CHECK_EQ(static_cast<int>(handle[5]), 0);  // IPv4
  memcpy(&port, handle + 28, 2);
  addr.sin.sin_family = AF_INET;
  addr.sin.sin_port = port;
  memcpy(&addr.sin.sin_addr, handle + 24, 4);
  Deadline dl(nullptr, 5);
  int junk = -1;
  CHECK_EQ(socketConnect(addr, dl, &junk), ncclSuccess);
  char garbage[48];  // a proof's size
  memset(garbage, 0x5a, sizeof(garbage));
  CHECK_EQ(socketSend(junk, garbage, sizeof(garbage), dl), ncclSuccess);
  uint8_t wrong[32] = {9, 9, 9};
  void* impostor = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  void* impostorProgress = nullptr;
  void* progress = nullptr;
  const auto until = Clock::now() + std::chrono::seconds(5);
  // The impostor connects first; its proof (with the wrong secret) goes once
  // the listener sends it a challenge, which accept does.
  while (!impostor && Clock::now() < until) {
    CHECK_EQ(b->connect(0, wrong, handle, &impostorProgress, &impostor), ncclSuccess);
    void* none = nullptr;
    CHECK_EQ(b->accept(listen, &none), ncclSuccess);
    CHECK(none == nullptr);
  }
  while ((!send || !recv) && Clock::now() < until) {
    if (!send) CHECK_EQ(b->connect(0, kSecret, handle, &progress, &send), ncclSuccess);
    if (!recv) CHECK_EQ(b->accept(listen, &recv), ncclSuccess);
  }
  CHECK(send && recv);
  // What arrives is the one with the secret's message, not the others'.
  char msg[4] = {'o', 'k', '!', 0}, got[8] = {};
  void* rs = nullptr;
  void* rr = nullptr;
  CHECK_EQ(b->isend(send, msg, 4, 0, nullptr, &rs), ncclSuccess);
  CHECK_EQ(b->irecv(recv, got, sizeof(got), 0, nullptr, &rr), ncclSuccess);
  std::vector<size_t> moved;
  CHECK(finish(b, {rs, rr}, &moved));
  CHECK_EQ(std::string(got), std::string("ok!"));
  void* another = nullptr;
  CHECK_EQ(b->accept(listen, &another), ncclSuccess);
  CHECK(another == nullptr);  // the stranger and the impostor were dropped
  close(junk);
  b->closeSend(impostor);
  b->closeSend(send);
  b->closeRecv(recv);
  b->closeListen(listen);
}

TEST(net_socket_fails_oversized_messages_and_closed_peers) {
  NetBackend* b = socketBackend();
  Pair p;
  CHECK(connectPair(b, kSecret, kSecret, &p));
  char big[100] = {}, small[10];
  void* rs = nullptr;
  void* rr = nullptr;
  CHECK_EQ(b->isend(p.send, big, sizeof(big), 0, nullptr, &rs), ncclSuccess);
  CHECK_EQ(b->irecv(p.recv, small, sizeof(small), 0, nullptr, &rr), ncclSuccess);
  std::vector<size_t> moved;
  CHECK(!finish(b, {rs, rr}, &moved));  // the receive refuses it
  closePair(b, &p);

  Pair q;
  CHECK(connectPair(b, kSecret, kSecret, &q));
  CHECK_EQ(b->irecv(q.recv, small, sizeof(small), 0, nullptr, &rr), ncclSuccess);
  b->closeSend(q.send);
  q.send = nullptr;
  CHECK(!finish(b, {rr}, &moved));  // the peer closed: the receive fails instead of waiting
  closePair(b, &q);
}

TEST(net_socket_lanes_carry_one_ordered_stream) {
  // Six sockets: every message cut in 64 KiB frames over them, each frame to
  // a free one, put back together in place and completed in order.
  Lanes lanes(2, 3);
  NetBackend* b = socketBackend();
  Pair p;
  CHECK(connectPair(b, kSecret, kSecret, &p));
  CHECK_EQ(static_cast<SocketStream*>(p.send)->lanes(), 6);
  CHECK_EQ(static_cast<SocketStream*>(p.recv)->lanes(), 6);
  CHECK(static_cast<SocketStream*>(p.send)->helped());  // two helper threads move them, each side
  CHECK(static_cast<SocketStream*>(p.recv)->helped());
  CHECK(!b->readsSendsOnlyInCalls());
  const size_t k64 = SocketStream::kMinFrameBytes;
  const std::vector<size_t> sizes = {0, 1, 1000, k64 - 1, k64, k64 + 1, 200000, (1 << 20) + 3, 5};
  std::vector<std::vector<char>> out, in;
  std::vector<void*> reqs;
  for (size_t m = 0; m < sizes.size(); ++m) {
    out.emplace_back(sizes[m]);
    for (size_t i = 0; i < sizes[m]; ++i) out[m][i] = pattern(m, i);
    in.emplace_back(sizes[m] + 100, 0);
  }
  std::vector<void*> sends(sizes.size()), recvs(sizes.size());
  for (size_t m = 0; m < sizes.size(); ++m) {  // the receive first for half, the send first for the rest
    if (m % 2 == 0) CHECK_EQ(b->irecv(p.recv, in[m].data(), in[m].size(), 3, nullptr, &recvs[m]), ncclSuccess);
    CHECK_EQ(b->isend(p.send, out[m].data(), out[m].size(), 3, nullptr, &sends[m]), ncclSuccess);
    if (m % 2 == 1) CHECK_EQ(b->irecv(p.recv, in[m].data(), in[m].size(), 3, nullptr, &recvs[m]), ncclSuccess);
  }
  reqs = recvs;
  reqs.insert(reqs.end(), sends.begin(), sends.end());
  std::vector<size_t> moved;
  CHECK(finish(b, reqs, &moved));
  for (size_t m = 0; m < sizes.size(); ++m) {
    CHECK_EQ(moved[m], sizes[m]);
    CHECK_EQ(moved[sizes.size() + m], sizes[m]);
    CHECK(memcmp(in[m].data(), out[m].data(), sizes[m]) == 0);
    CHECK(in[m][sizes[m]] == 0);  // nothing past the message
  }
  closePair(b, &p);
}

TEST(net_socket_receiver_takes_frames_ahead_of_its_posts) {
  // 16 messages of 512 KiB sent before the receiver posts more than one:
  // frames of later messages come first and wait in the receiver's buffer
  // (4 MiB at most; past that a lane waits for the post); every byte lands.
  for (int threads : {1, 4}) {
  Lanes lanes(threads, threads == 1 ? 4 : 1);
  NetBackend* b = socketBackend();
  Pair p;
  CHECK(connectPair(b, kSecret, kSecret, &p));
  CHECK_EQ(static_cast<SocketStream*>(p.recv)->helped(), threads > 1);
  const size_t n = 16, size = 512 << 10;
  std::vector<std::vector<char>> out(n, std::vector<char>(size)), in(n, std::vector<char>(size, 0));
  for (size_t m = 0; m < n; ++m)
    for (size_t i = 0; i < size; ++i) out[m][i] = pattern(m, i);
  std::vector<void*> sends(n, nullptr), recvs(n, nullptr);
  size_t posted = 0, sent = 0, got = 0, sentPosted = 0;
  bool staged = false;
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (got < n && Clock::now() < until) {
    while (sentPosted < n && sentPosted - sent < NCCL_NET_MAX_REQUESTS) {
      CHECK_EQ(b->isend(p.send, out[sentPosted].data(), size, 1, nullptr, &sends[sentPosted]), ncclSuccess);
      CHECK(sends[sentPosted] != nullptr);
      ++sentPosted;
    }
    int done = 0;
    size_t bytes = 0;
    while (sent < sentPosted) {
      CHECK_EQ(b->test(sends[sent], &done, &bytes), ncclSuccess);
      if (!done) break;
      ++sent;
    }
    if (posted == 0 || (posted < n && got == posted)) {  // one receive at a time, once the last is in
      CHECK_EQ(b->irecv(p.recv, in[posted].data(), size, 1, nullptr, &recvs[posted]), ncclSuccess);
      ++posted;
    }
    CHECK_EQ(b->test(recvs[got], &done, &bytes), ncclSuccess);
    staged = staged || static_cast<SocketStream*>(p.recv)->stagedBytes() > 0;
    if (done) {
      CHECK_EQ(bytes, size);
      ++got;
    }
  }
  CHECK_EQ(got, n);
  CHECK(staged);
  for (size_t m = 0; m < n; ++m) CHECK(memcmp(in[m].data(), out[m].data(), size) == 0);
  closePair(b, &p);
  }
}

TEST(net_socket_merges_devices) {
  NetBackend* b = socketBackend();
  const int phys = b->devices();
  int vdev = -1;
  const int one[1] = {0}, twice[2] = {0, 0}, missing[1] = {phys}, five[5] = {0, 0, 0, 0, 0};
  CHECK_EQ(b->makeVDevice(twice, 2, &vdev), ncclInvalidArgument);
  CHECK_EQ(b->makeVDevice(missing, 1, &vdev), ncclInvalidArgument);
  CHECK_EQ(b->makeVDevice(five, 5, &vdev), ncclInvalidArgument);
  CHECK_EQ(b->makeVDevice(one, 1, &vdev), ncclSuccess);
  CHECK(vdev >= phys);
  int again = -1;
  CHECK_EQ(b->makeVDevice(one, 1, &again), ncclSuccess);
  CHECK_EQ(again, vdev);  // the same set, the same device
  CHECK_EQ(b->devices(), phys);  // merged devices come after the physical ones
  NetDeviceProps props;
  CHECK_EQ(b->properties(vdev, &props), ncclSuccess);
  CHECK_EQ(props.name, std::string("lo"));
  CHECK(b->properties(vdev + 1, &props) != ncclSuccess);
  Pair p;
  CHECK(connectPair(b, kSecret, kSecret, &p, vdev));
  char msg[3] = {'h', 'i', 0}, got[3] = {};
  void* rs = nullptr;
  void* rr = nullptr;
  CHECK_EQ(b->isend(p.send, msg, 3, 0, nullptr, &rs), ncclSuccess);
  CHECK_EQ(b->irecv(p.recv, got, 3, 0, nullptr, &rr), ncclSuccess);
  std::vector<size_t> moved;
  CHECK(finish(b, {rs, rr}, &moved));
  CHECK_EQ(std::string(got), std::string("hi"));
  closePair(b, &p);
}

TEST(net_socket_receiver_keeps_what_came_before_the_peer_closed) {
  // The sender sends three messages and closes. The receiver, which posted
  // one, reads ahead (the other two wait in its buffer) to the end of every
  // lane; the two it posts after still complete, and a fourth fails.
  for (int threads : {1, 2}) for (int socks : {1, 3}) {
    Lanes lanes(threads, socks);
    NetBackend* b = socketBackend();
    Pair p;
    CHECK(connectPair(b, kSecret, kSecret, &p));
    const size_t size = 40000;
    std::vector<std::vector<char>> out(3, std::vector<char>(size)), in(4, std::vector<char>(size, 0));
    for (size_t m = 0; m < 3; ++m)
      for (size_t i = 0; i < size; ++i) out[m][i] = pattern(m, i);
    std::vector<void*> sends(3);
    for (size_t m = 0; m < 3; ++m) CHECK_EQ(b->isend(p.send, out[m].data(), size, 2, nullptr, &sends[m]), ncclSuccess);
    std::vector<size_t> moved;
    CHECK(finish(b, sends, &moved));
    b->closeSend(p.send);
    p.send = nullptr;
    void* first = nullptr;
    CHECK_EQ(b->irecv(p.recv, in[0].data(), size, 2, nullptr, &first), ncclSuccess);
    CHECK(finish(b, {first}, &moved));
    void* second = nullptr;  // the first's test read on to the end of every lane
    CHECK_EQ(b->irecv(p.recv, in[1].data(), size, 2, nullptr, &second), ncclSuccess);
    CHECK(finish(b, {second}, &moved));
    void* third = nullptr;
    CHECK_EQ(b->irecv(p.recv, in[2].data(), size, 2, nullptr, &third), ncclSuccess);
    CHECK(finish(b, {third}, &moved));
    for (size_t m = 0; m < 3; ++m) CHECK(memcmp(in[m].data(), out[m].data(), size) == 0);
    void* fourth = nullptr;
    CHECK_EQ(b->irecv(p.recv, in[3].data(), size, 2, nullptr, &fourth), ncclSuccess);
    size_t bytes = 0;
    int done = 0;
    ncclResult_t r = ncclSuccess;
    for (auto t = Clock::now() + std::chrono::seconds(2); r == ncclSuccess && !done && Clock::now() < t;)
      r = b->test(fourth, &done, &bytes);
    CHECK_EQ(r, ncclRemoteError);  // nothing more can come
    closePair(b, &p);
  }
}

namespace {

// A receiving stream over one end of socketpairs (its lanes), and the other
// ends to write frames into by hand (what a broken or hostile peer with the
// secret could send).
struct RawPeer {
  std::vector<int> mine, theirs;
  SocketStream* stream = nullptr;
  explicit RawPeer(int lanes = 1) {
    for (int i = 0; i < lanes; ++i) {
      int fds[2] = {-1, -1};
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds);
      mine.push_back(fds[0]);
      theirs.push_back(fds[1]);
    }
    stream = new SocketStream(mine, false);
  }
  ~RawPeer() {
    delete stream;  // closes mine
    for (int fd : theirs) close(fd);
  }
  void frame(uint32_t seq, uint32_t tag, uint32_t total, uint32_t offset, uint32_t len, const void* payload = nullptr) {
    const uint32_t head[5] = {seq, tag, total, offset, len};
    CHECK(write(theirs[0], head, sizeof(head)) == static_cast<ssize_t>(sizeof(head)));
    std::vector<char> fill(len, 7);
    if (len) CHECK(write(theirs[0], payload ? payload : fill.data(), len) == static_cast<ssize_t>(len));
  }
  // Tests r until it completes or fails (2 s at most): the result, *size.
  ncclResult_t wait(void* r, size_t* size) {
    int done = 0;
    ncclResult_t res = ncclSuccess;
    for (auto until = Clock::now() + std::chrono::seconds(2); res == ncclSuccess && !done && Clock::now() < until;)
      res = SocketStream::test(r, &done, size);
    return res == ncclSuccess && !done ? ncclInProgress : res;
  }
};

}  // namespace

TEST(net_socket_refuses_frames_no_message_can_take) {
  char buf[64];
  size_t size = 0;
  void* r = nullptr;
  {  // a good one first: two frames of one message, in place
    RawPeer p;
    CHECK_EQ(p.stream->post(buf, sizeof(buf), 4, &r), ncclSuccess);
    p.frame(0, 4, 20, 10, 10, "0123456789");
    p.frame(0, 4, 20, 0, 10, "abcdefghij");
    CHECK_EQ(p.wait(r, &size), ncclSuccess);
    CHECK_EQ(size, size_t{20});
    CHECK(memcmp(buf, "abcdefghij0123456789", 20) == 0);
  }
  struct Bad {
    const char* what;
    uint32_t seq, tag, total, offset, len;
  };
  const Bad bad[] = {{"another tag", 0, 5, 10, 0, 10},
                     {"more than the receive takes", 0, 4, 65, 0, 10},
                     {"past its message's end", 0, 4, 20, 15, 10},
                     {"an offset that wraps", 0, 4, 20, 0xfffffff0u, 0x20}};
  for (const Bad& b : bad) {
    RawPeer p;
    CHECK_EQ(p.stream->post(buf, sizeof(buf), 4, &r), ncclSuccess);
    p.frame(b.seq, b.tag, b.total, b.offset, b.len);
    const ncclResult_t res = p.wait(r, &size);
    if (res != ncclRemoteError) fprintf(stderr, "  case: %s\n", b.what);
    CHECK_EQ(res, ncclRemoteError);
  }
  {  // two frames of one message that disagree on its size
    RawPeer p;
    CHECK_EQ(p.stream->post(buf, sizeof(buf), 4, &r), ncclSuccess);
    p.frame(0, 4, 20, 0, 10);
    p.frame(0, 4, 30, 10, 10);
    CHECK_EQ(p.wait(r, &size), ncclRemoteError);
  }
  {  // a frame of a message that is complete
    RawPeer p;
    CHECK_EQ(p.stream->post(buf, sizeof(buf), 4, &r), ncclSuccess);
    p.frame(0, 4, 8, 0, 8);
    CHECK_EQ(p.wait(r, &size), ncclSuccess);
    CHECK_EQ(p.stream->post(buf, sizeof(buf), 4, &r), ncclSuccess);
    p.frame(0, 4, 8, 0, 8);
    CHECK_EQ(p.wait(r, &size), ncclRemoteError);
  }
  {  // the peer closes mid-frame
    RawPeer p;
    CHECK_EQ(p.stream->post(buf, sizeof(buf), 4, &r), ncclSuccess);
    const uint32_t head[5] = {0, 4, 20, 0, 20};
    CHECK(write(p.theirs[0], head, sizeof(head)) == static_cast<ssize_t>(sizeof(head)));
    CHECK(write(p.theirs[0], "half", 4) == 4);
    shutdown(p.theirs[0], SHUT_WR);
    CHECK_EQ(p.wait(r, &size), ncclRemoteError);
  }
}

TEST(net_socket_holds_at_most_its_limit_ahead_of_the_posts) {
  // Two lanes: the first carries messages 1 to 23 while the receiver waits
  // for message 0, which comes last on the second. The frames ahead wait in
  // the receiver's buffer up to 4 MiB; past that the first lane waits for
  // the posts (no more memory taken). Then every post gets its message.
  RawPeer p(2);
  const size_t frame = 256 << 10, n = 24;  // 6 MiB in all
  std::vector<std::vector<char>> in(n, std::vector<char>(frame, 0));
  std::vector<char> out;  // lane 0's bytes not yet taken by its socket
  size_t made = 1, at = 0;
  auto bytesOf = [&](size_t m) {
    const uint32_t head[5] = {static_cast<uint32_t>(m), 9, static_cast<uint32_t>(frame), 0,
                              static_cast<uint32_t>(frame)};
    std::vector<char> b(reinterpret_cast<const char*>(head), reinterpret_cast<const char*>(head) + sizeof(head));
    for (size_t i = 0; i < frame; ++i) b.push_back(pattern(m, i));
    return b;
  };
  auto feed = [&] {  // lane 0: messages 1 to n-1, as fast as its socket takes them
    for (;;) {
      if (at == out.size()) {
        if (made == n) return;
        out = bytesOf(made++);
        at = 0;
      }
      const ssize_t k = write(p.theirs[0], out.data() + at, out.size() - at);
      if (k <= 0) return;
      at += static_cast<size_t>(k);
    }
  };
  void* first = nullptr;
  CHECK_EQ(p.stream->post(in[0].data(), frame, 9, &first), ncclSuccess);
  size_t most = 0, size = 0;
  int done = 0;
  for (int k = 0; k < 300; ++k) {  // message 0 is not there: the first lane runs ahead
    feed();
    CHECK_EQ(SocketStream::test(first, &done, &size), ncclSuccess);
    CHECK(!done);
    most = std::max(most, p.stream->stagedBytes());
  }
  CHECK_EQ(most, SocketStream::kStageBytes);  // 16 frames held, then the lane waited
  std::vector<char> zero = bytesOf(0);
  for (size_t put = 0; put < zero.size();) {  // message 0 on the second lane
    const ssize_t k = write(p.theirs[1], zero.data() + put, zero.size() - put);
    if (k > 0) put += static_cast<size_t>(k);
    CHECK_EQ(SocketStream::test(first, &done, &size), ncclSuccess);
  }
  for (auto until = Clock::now() + std::chrono::seconds(5); !done && Clock::now() < until;)
    CHECK_EQ(SocketStream::test(first, &done, &size), ncclSuccess);
  CHECK(done);
  for (size_t m = 1; m < n; ++m) {
    void* r = nullptr;
    CHECK_EQ(p.stream->post(in[m].data(), frame, 9, &r), ncclSuccess);
    done = 0;
    for (auto until = Clock::now() + std::chrono::seconds(5); !done && Clock::now() < until;) {
      feed();
      CHECK_EQ(SocketStream::test(r, &done, &size), ncclSuccess);
      CHECK(p.stream->stagedBytes() <= SocketStream::kStageBytes);
    }
    CHECK(done);
    CHECK_EQ(size, frame);
  }
  CHECK_EQ(made, n);
  for (size_t m = 0; m < n; ++m) {
    bool same = true;
    for (size_t i = 0; i < frame && same; ++i) same = in[m][i] == pattern(m, i);
    CHECK(same);
  }
}
