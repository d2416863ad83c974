// Unit tests of the network layer's TCP backend (net/socket_net.cc), over
// loopback (the tests run with NCCL_SOCKET_IFNAME=lo).
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "test_harness.h"

#include "bootstrap/socket.h"
#include "net/net.h"
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
bool connectPair(NetBackend* b, const uint8_t* sendSecret, const uint8_t* recvSecret, Pair* p) {
  alignas(8) char handle[kNetHandleBytes];
  if (b->listen(0, recvSecret, handle, &p->listen) != ncclSuccess) return false;
  void* progress = nullptr;
  const auto until = Clock::now() + std::chrono::seconds(5);
  while ((!p->send || !p->recv) && Clock::now() < until) {
    if (!p->send && b->connect(0, sendSecret, handle, &progress, &p->send) != ncclSuccess) return false;
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
  // A stranger who read the handle: it knows the address (after the magic and the device), not the secret;
  // it sends junk where the proof goes.
  SockAddr addr;
  memcpy(&addr, handle + 8, sizeof(addr));
  Deadline dl(nullptr, 5);
  int junk = -1;
  CHECK_EQ(socketConnect(addr, dl, &junk), ncclSuccess);
  char garbage[36];
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
