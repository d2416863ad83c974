// Unit tests of ACCL internals (linked against the static archive). A tiny
// harness: TEST(name) registers a function, CHECK_EQ prints both values.
// Run all: ./accl_unit_tests; one: ./accl_unit_tests NAME. Prints "N passed, M failed".
#include <algorithm>
#include <cfenv>
#include <cmath>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

#include "test_harness.h"

#include "api/device_api_abi.h"
#include "base/debug.h"
#include "base/param.h"
#include "base/sha256.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/hello_gate.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "coll/dev_comm.h"
#include "coll/host_direct_state.h"
#include "coll/host_direct_wait.h"
#include "coll/permutation.h"
#include "coll/reg_table.h"
#include "coll/tree.h"
#include "coll/tuner.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/mode.h"
#include "device/host_kernels.h"
#include "device/host_reduce.h"
#include "device/lowp.h"
#include "device/lowp_vec.h"
#include "transport/connection.h"
#include "transport/connections.h"

namespace {

using namespace accl;

TEST(ifname_prefix) {
  IfSpec s = parseIfSpec("eth,ib");
  CHECK(!s.exclude && !s.exact);
  CHECK(ifMatches(s, "eth0"));
  CHECK(ifMatches(s, "ib1"));
  CHECK(!ifMatches(s, "lo"));
  CHECK(!ifMatches(s, "docker0"));
}

TEST(ifname_exclude_and_exact) {
  IfSpec ex = parseIfSpec("^docker,lo");
  CHECK(ex.exclude);
  CHECK(ifMatches(ex, "eth0"));
  CHECK(!ifMatches(ex, "lo"));
  CHECK(!ifMatches(ex, "docker0"));
  IfSpec exact = parseIfSpec("=eth0");
  CHECK(exact.exact);
  CHECK(ifMatches(exact, "eth0"));
  CHECK(!ifMatches(exact, "eth01"));
  IfSpec notExact = parseIfSpec("^=eth0");
  CHECK(notExact.exclude && notExact.exact);
  CHECK(!ifMatches(notExact, "eth0"));
  CHECK(ifMatches(notExact, "eth01"));
  CHECK(!ifMatches(parseIfSpec(""), "eth0"));
}

TEST(parse_addr) {
  SockAddr a;
  CHECK(parseAddr("127.0.0.1:1234", &a));
  CHECK_EQ(addrToString(a), std::string("127.0.0.1:1234"));
  CHECK(parseAddr("[::1]:80", &a));
  CHECK_EQ(addrToString(a), std::string("[::1]:80"));
  CHECK(!parseAddr("no-port", &a));
  CHECK(!parseAddr("[::1]80", &a));
  CHECK(!parseAddr(":80", &a));
  // A port is a number in [1, 65535]: not 0 (any), not wrapped, not a service name.
  CHECK(!parseAddr("127.0.0.1:0", &a));
  CHECK(!parseAddr("127.0.0.1:70000", &a));
  CHECK(!parseAddr("127.0.0.1:http", &a));
  CHECK(!parseAddr("127.0.0.1:80x", &a));
  CHECK(parseAddr("127.0.0.1:65535", &a));
}

// A listener on a free port of 127.0.0.1 (its address in *bound).
int listenOnLoopback(SockAddr* bound) {
  SockAddr any;
  CHECK(parseAddr("127.0.0.1:1", &any));
  any.sin.sin_port = 0;
  int fd = -1;
  CHECK_EQ(socketListen(any, &fd, bound), ncclSuccess);
  return fd;
}

// A valid hello that came while nobody asked the gate (it returned another
// connection first) is still handed on after the 5 s a silent stranger gets.
TEST(hello_gate_keeps_a_waiting_hello) {
  SockAddr bound;
  const int listenFd = listenOnLoopback(&bound);
  uint8_t secret[kSecretBytes] = {7};
  Hello h[2] = {};
  for (int r = 0; r < 2; ++r) {
    h[r].magic = kHelloMagic;
    h[r].purpose = Purpose::Data;
    h[r].rank = r;
    h[r].to = kToRoot;  // the gate below is a root's: it challenges every connection
  }
  int clients[2];
  for (int r = 0; r < 2; ++r) CHECK_EQ(socketConnect(bound, Deadline(nullptr, 5), &clients[r]), ncclSuccess);
  {
    HelloGate gate(listenFd, secret, "test");
    std::thread late([&] {  // rank 1 answers its challenge at once; rank 0 later
      CHECK_EQ(sendRootHello(clients[1], h[1], secret, Deadline(nullptr, 5)), ncclSuccess);
    });
    int fd[2] = {-1, -1};
    Hello got[2];
    CHECK_EQ(gate.next(Deadline(nullptr, 5), &fd[0], &got[0]), ncclSuccess);
    late.join();
    CHECK_EQ(got[0].rank, 1);
    CHECK_EQ(sendRootHello(clients[0], h[0], secret, Deadline(nullptr, 5)), ncclSuccess);
    sleep(HelloGate::kHelloSeconds + 1);  // its hello waits in the socket meanwhile
    CHECK_EQ(gate.next(Deadline(nullptr, 3), &fd[1], &got[1]), ncclSuccess);
    CHECK_EQ(got[1].rank, 0);
    for (int f : fd)
      if (f >= 0) close(f);
  }
  for (int c : clients) close(c);
  close(listenFd);
}

// A hello proves the secret without carrying it: a wrong secret, a changed
// field, a hello meant for another rank or another communicator, or a replay
// of a hello the gate took is dropped, and a sealed hello holds no copy of
// the secret.
// A rank's gate (no challenge) and the hello of `rank` for it.
Hello helloFor(int32_t rank, const uint8_t* secret) {
  Hello h = {};
  h.magic = kHelloMagic;
  h.purpose = Purpose::Data;
  h.rank = rank;
  h.nranks = 2;
  h.to = 0;
  CHECK_EQ(sealHello(h, secret), ncclSuccess);
  return h;
}

// n silent connections to `bound` (*silent, in the order they connected),
// then one that sends rank 1's hello: its descriptor.
int silentThenHello(const SockAddr& bound, const uint8_t* secret, size_t n, std::vector<int>* silent) {
  silent->assign(n, -1);
  for (int& c : *silent) CHECK_EQ(socketConnect(bound, Deadline(nullptr, 5), &c), ncclSuccess);
  int good = -1;
  const Hello h = helloFor(1, secret);
  CHECK_EQ(socketConnect(bound, Deadline(nullptr, 5), &good), ncclSuccess);
  CHECK_EQ(socketSend(good, &h, sizeof(h), Deadline(nullptr, 5)), ncclSuccess);
  return good;
}

// Past kMaxPending silent connections the oldest go (their clients see the
// end of the stream), and a rank's hello behind the flood still passes.
TEST(hello_gate_outlasts_a_flood_of_silent_connections) {
  SockAddr bound;
  const int listenFd = listenOnLoopback(&bound);
  uint8_t secret[kSecretBytes] = {5};
  const size_t silent = HelloGate::kMaxPending + 40;
  HelloGate gate(listenFd, secret, "test", 0);
  ncclResult_t result = ncclInternalError;
  int fd = -1;
  Hello got = {};
  // The gate accepts while the flood comes (a listen backlog may hold fewer).
  std::thread door([&] { result = gate.next(Deadline(nullptr, 20), &fd, &got); });
  std::vector<int> clients;
  const int good = silentThenHello(bound, secret, silent, &clients);
  door.join();
  CHECK_EQ(result, ncclSuccess);
  CHECK_EQ(got.rank, 1);
  if (fd >= 0) close(fd);
  char byte;
  pollfd oldest{clients[0], POLLIN, 0};
  CHECK_EQ(poll(&oldest, 1, 5000), 1);
  CHECK_EQ(recv(clients[0], &byte, 1, MSG_DONTWAIT), 0);  // the oldest was dropped: the end of its stream
  for (int c : clients) close(c);
  close(good);
  close(listenFd);
}

// A process with no descriptor left to accept with frees the oldest silent
// connection's instead of failing: a child process at its limit still takes
// the hello that comes after 30 silent connections.
TEST(hello_gate_outlasts_running_out_of_descriptors) {
  SockAddr bound;
  const int listenFd = listenOnLoopback(&bound);
  uint8_t secret[kSecretBytes] = {6};
  const pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    int limit = 0, free = 0;  // descriptors below the limit: all taken but 4
    for (; free < 4; ++limit) free += fcntl(limit, F_GETFD) == -1;
    rlimit lim{static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) _exit(2);
    HelloGate gate(listenFd, secret, "test", 0);
    int fd = -1;
    Hello got;
    const ncclResult_t r = gate.next(Deadline(nullptr, 20), &fd, &got);
    _exit(r == ncclSuccess && got.rank == 1 ? 0 : 1);
  }
  std::vector<int> clients;
  const int good = silentThenHello(bound, secret, 30, &clients);
  int status = -1;
  CHECK_EQ(waitpid(child, &status, 0), child);
  CHECK(WIFEXITED(status));
  CHECK_EQ(WEXITSTATUS(status), 0);
  for (int c : clients) close(c);
  close(good);
  close(listenFd);
}

TEST(hello_mac_and_replay) {
  SockAddr bound;
  const int listenFd = listenOnLoopback(&bound);
  uint8_t secret[kSecretBytes], other[kSecretBytes];
  for (int i = 0; i < kSecretBytes; ++i) secret[i] = static_cast<uint8_t>(i + 1), other[i] = secret[i];
  other[5] ^= 1;
  uint8_t session[kSessionBytes] = {9, 8, 7};
  Hello good = {};
  good.magic = kHelloMagic;
  good.purpose = Purpose::Data;
  good.rank = 1;
  good.nranks = 2;
  good.to = 0;  // the gate below is rank 0's
  memcpy(good.session, session, kSessionBytes);
  CHECK_EQ(sealHello(good, secret), ncclSuccess);
  CHECK(helloValid(good, secret));
  CHECK(!helloValid(good, other));
  CHECK(std::search(reinterpret_cast<const uint8_t*>(&good), reinterpret_cast<const uint8_t*>(&good + 1), secret,
                    secret + kSecretBytes) == reinterpret_cast<const uint8_t*>(&good + 1));
  Hello forged = good;
  forged.rank = 0;  // a changed field: the MAC no longer verifies
  CHECK(!helloValid(forged, secret));
  Hello wrongKey = good;
  CHECK_EQ(sealHello(wrongKey, other), ncclSuccess);
  Hello elsewhere = good;  // sealed right, but for rank 1's listener
  elsewhere.to = 1;
  CHECK_EQ(sealHello(elsewhere, secret), ncclSuccess);
  Hello otherComm = good;  // sealed right, but another communicator's
  otherComm.session[0] ^= 1;
  CHECK_EQ(sealHello(otherComm, secret), ncclSuccess);
  // Sent in order: wrong key, forged, for another rank, for another
  // communicator, good, the good one replayed, then a fresh one.
  Hello fresh = good;
  fresh.rank = 0;
  CHECK_EQ(sealHello(fresh, secret), ncclSuccess);
  const Hello sent[] = {wrongKey, forged, elsewhere, otherComm, good, good, fresh};
  const int n = sizeof(sent) / sizeof(sent[0]);
  int clients[n];
  for (int i = 0; i < n; ++i) {
    CHECK_EQ(socketConnect(bound, Deadline(nullptr, 5), &clients[i]), ncclSuccess);
    CHECK_EQ(socketSend(clients[i], &sent[i], sizeof(Hello), Deadline(nullptr, 5)), ncclSuccess);
  }
  {
    HelloGate gate(listenFd, secret, "test", 0);
    gate.setSession(session);
    std::vector<int> ranks;
    for (int k = 0; k < 2; ++k) {
      int fd = -1;
      Hello got;
      CHECK_EQ(gate.next(Deadline(nullptr, 5), &fd, &got), ncclSuccess);
      ranks.push_back(got.rank);
      close(fd);
    }
    std::sort(ranks.begin(), ranks.end());
    CHECK_EQ(ranks[0], 0);
    CHECK_EQ(ranks[1], 1);
    int fd = -1;
    Hello got;
    CHECK_EQ(gate.next(Deadline(nullptr, 1), &fd, &got), ncclTimeout);  // nothing else passes
  }
  for (int c : clients) close(c);
  close(listenFd);
}

// A child communicator's id on its way over the parent's bootstrap (split,
// shrink, grow): the secret is not in the bytes that travel, only the
// parent's secret opens them, for the context they were sealed for, and any
// changed byte is refused.
TEST(sealed_id_hides_the_secret_and_refuses_changes) {
  uint8_t parent[kSecretBytes], other[kSecretBytes];
  for (int i = 0; i < kSecretBytes; ++i) parent[i] = static_cast<uint8_t>(3 * i + 7), other[i] = parent[i];
  other[31] ^= 0x80;
  UniqueIdLayout id;
  memset(&id, 0, sizeof(id));
  id.magic = kIdMagic;
  for (int i = 0; i < kSecretBytes; ++i) id.secret[i] = static_cast<uint8_t>(200 - i);
  const IdContext ctx{0x1234, kIdSplit, 2, 5, 7};
  SealedId a, b;
  CHECK_EQ(sealId(parent, ctx, id, &a), ncclSuccess);
  CHECK_EQ(sealId(parent, ctx, id, &b), ncclSuccess);
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(&a);
  CHECK(std::search(bytes, bytes + sizeof(a), id.secret, id.secret + kSecretBytes) == bytes + sizeof(a));
  CHECK(memcmp(a.id.secret, b.id.secret, kSecretBytes) != 0);  // a fresh salt: a fresh mask
  UniqueIdLayout got;
  memset(&got, 0, sizeof(got));
  CHECK(openId(parent, ctx, a, &got));
  CHECK(memcmp(&got, &id, sizeof(id)) == 0);
  CHECK(openId(parent, ctx, b, &got));
  CHECK(memcmp(&got, &id, sizeof(id)) == 0);
  CHECK(!openId(other, ctx, a, &got));  // another communicator's secret
  // Another context: another communicator, kind, call, sender or color.
  for (IdContext elsewhere : {IdContext{0x1235, kIdSplit, 2, 5, 7}, IdContext{0x1234, kIdShrink, 2, 5, 7},
                              IdContext{0x1234, kIdSplit, 3, 5, 7}, IdContext{0x1234, kIdSplit, 2, 4, 7},
                              IdContext{0x1234, kIdSplit, 2, 5, 8}})
    CHECK(!openId(parent, elsewhere, a, &got));
  for (size_t at : {offsetof(SealedId, id) + offsetof(UniqueIdLayout, root), offsetof(SealedId, id) +
                    offsetof(UniqueIdLayout, secret), offsetof(SealedId, salt), offsetof(SealedId, mac)}) {
    SealedId changed = a;
    reinterpret_cast<uint8_t*>(&changed)[at] ^= 1;
    CHECK(!openId(parent, ctx, changed, &got));
  }
}

// A process on the root's address that does not hold the secret (here it
// answers every hello at once, as success and as a refusal) cannot make a
// rank take its table or its error: the rank's init fails with
// ncclRemoteError, since the root's proof does not verify.
TEST(root_must_prove_the_secret) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  for (int32_t status : {static_cast<int32_t>(ncclSuccess), static_cast<int32_t>(ncclInvalidUsage)}) {
    UniqueIdLayout id{};
    id.magic = kIdMagic;
    id.version = 1;
    for (int i = 0; i < kSecretBytes; ++i) id.secret[i] = static_cast<uint8_t>(3 * i + 1);
    const int listenFd = listenOnLoopback(&id.root);
    std::thread impostor([listenFd, status] {
      int fd = -1;
      if (socketAccept(listenFd, Deadline(nullptr, 10), &fd) != ncclSuccess) return;
      Hello h;
      RootReply r{};
      r.status = status;
      SockAddr table[1] = {};
      uint8_t challenge[kSessionBytes] = {}, proof[kMacBytes] = {};
      Deadline dl(nullptr, 10);
      if (socketSend(fd, challenge, sizeof(challenge), dl) == ncclSuccess &&
          socketRecv(fd, &h, sizeof(h), dl) == ncclSuccess && socketSend(fd, &r, sizeof(r), dl) == ncclSuccess &&
          (status != ncclSuccess || socketSend(fd, table, sizeof(table), dl) == ncclSuccess))
        (void)socketSend(fd, proof, sizeof(proof), dl);
      sleep(1);
      close(fd);
    });
    std::atomic<uint32_t> abortFlag{0};
    {
      Bootstrap b;
      CHECK_EQ(b.init(id, 0, 1, &abortFlag), ncclRemoteError);
    }
    impostor.join();
    close(listenFd);
  }
}

// A hello to a root, taken off the wire, passes neither at that root again
// nor at another root with the same secret (a later job's, under
// NCCL_COMM_ID): each connection's hello must carry the challenge the root
// sent on it. A hello that ignores the challenge fails too.
TEST(root_hello_replay) {
  uint8_t secret[kSecretBytes] = {5, 4, 3};
  SockAddr boundA, boundB;
  const int listenA = listenOnLoopback(&boundA), listenB = listenOnLoopback(&boundB);
  HelloGate rootA(listenA, secret, "root A"), rootB(listenB, secret, "root B");
  Hello h{};
  h.magic = kHelloMagic;
  h.purpose = Purpose::Root;
  h.nranks = 2;
  h.to = kToRoot;
  int honest = -1;
  CHECK_EQ(socketConnect(boundA, Deadline(nullptr, 5), &honest), ncclSuccess);
  std::thread rank([&] { CHECK_EQ(sendRootHello(honest, h, secret, Deadline(nullptr, 5)), ncclSuccess); });
  int fd = -1;
  Hello got;
  CHECK_EQ(rootA.next(Deadline(nullptr, 5), &fd, &got), ncclSuccess);  // the honest hello passes
  rank.join();
  close(fd);
  // The roots wait (and challenge) while the recorded hello (h, as sent) is
  // replayed to each after reading its challenge, and a hello sealed with
  // the secret but blind to the challenge (its session zero) goes to B.
  Hello blind = h;
  memset(blind.session, 0, kSessionBytes);
  CHECK_EQ(sealHello(blind, secret), ncclSuccess);
  for (auto [gate, bound, sent] : {std::tuple{&rootA, boundA, h}, std::tuple{&rootB, boundB, h},
                                   std::tuple{&rootB, boundB, blind}}) {
    std::thread root([gate = gate] {
      int taken = -1;
      Hello hello;
      CHECK_EQ(gate->next(Deadline(nullptr, 2), &taken, &hello), ncclTimeout);
    });
    int replay = -1;
    uint8_t challenge[kSessionBytes];
    CHECK_EQ(socketConnect(bound, Deadline(nullptr, 5), &replay), ncclSuccess);
    CHECK_EQ(socketRecv(replay, challenge, sizeof(challenge), Deadline(nullptr, 5)), ncclSuccess);
    CHECK(memcmp(challenge, sent.session, kSessionBytes) != 0);
    CHECK_EQ(socketSend(replay, &sent, sizeof(sent), Deadline(nullptr, 5)), ncclSuccess);
    root.join();
    close(replay);
  }
  close(honest);
  close(listenA);
  close(listenB);
}

// Silent strangers connected to a unique id's root, and one that holds the
// secret but claims nranks = -1: a rank's init still passes at once, and the
// root refuses the bad hello instead of dying.
TEST(bootstrap_root_strangers) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  UniqueIdLayout id;
  CHECK_EQ(makeUniqueId(&id), ncclSuccess);
  std::vector<int> silent;
  for (int i = 0; i < 3; ++i) {
    int fd = -1;
    CHECK_EQ(socketConnect(id.root, Deadline(nullptr, 5), &fd), ncclSuccess);
    silent.push_back(fd);
  }
  int bad = -1;
  CHECK_EQ(socketConnect(id.root, Deadline(nullptr, 5), &bad), ncclSuccess);
  Hello h{};
  h.magic = kHelloMagic;
  h.purpose = Purpose::Root;
  h.rank = 0;
  h.nranks = -1;
  h.to = kToRoot;
  CHECK_EQ(sendRootHello(bad, h, id.secret, Deadline(nullptr, 5)), ncclSuccess);
  RootReply reply{};
  CHECK_EQ(socketRecv(bad, &reply, sizeof(reply), Deadline(nullptr, 5)), ncclSuccess);
  CHECK_EQ(reply.status, static_cast<int32_t>(ncclInvalidArgument));
  close(bad);
  std::atomic<uint32_t> abortFlag{0};
  const auto t0 = std::chrono::steady_clock::now();
  {
    Bootstrap b;
    CHECK_EQ(b.init(id, 0, 1, &abortFlag), ncclSuccess);
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(took < 3);
  for (int fd : silent) close(fd);
}

// What a peer sends of itself at init: each field this build relies on is
// checked (a slot size of 0 would make FIFOs of no slots, a wrong rank
// another rank's data).
TEST(peer_info_checks) {
  PeerInfo good = {};
  good.rank = 2;
  good.pid = 1234;
  good.cudaDev = -1;
  good.slotBytes = 1 << 20;
  good.slotBytesAcross = 1 << 19;
  memset(good.hostname, 'h', sizeof(good.hostname));  // unterminated: terminated by the check
  std::string why;
  PeerInfo p = good;
  CHECK(peerInfoValid(p, 2, &why));
  CHECK_EQ(strlen(p.hostname), sizeof(p.hostname) - 1);
  struct Case {
    std::function<void(PeerInfo&)> spoil;
    const char* why;
  } cases[] = {
      {[](PeerInfo& q) { q.rank = 3; }, "rank = 3"},
      {[](PeerInfo& q) { q.slotBytes = 0; }, "slotBytes = 0"},
      {[](PeerInfo& q) { q.slotBytes = 4097; }, "slotBytes = 4097"},
      {[](PeerInfo& q) { q.slotBytes = 2u << 30; }, "slotBytes = 2147483648"},
      {[](PeerInfo& q) { q.slotBytesAcross = 4097; }, "slotBytesAcross = 4097"},
      {[](PeerInfo& q) { q.deviceMode = 7; }, "deviceMode = 7"},
      {[](PeerInfo& q) { q.hostDirect = -1; }, "hostDirect = -1"},
      {[](PeerInfo& q) { q.pid = 0; }, "pid = 0"},
      {[](PeerInfo& q) { q.cudaDev = -5; }, "cudaDev = -5"},
      {[](PeerInfo& q) { q.deviceMode = 1; q.smCount = 132; }, "cudaDev = -1"},  // device mode names its device
      {[](PeerInfo& q) { q.deviceMode = 1; q.cudaDev = 0; q.smCount = 0; }, "smCount = 0"},
      {[](PeerInfo& q) { q.deviceMode = 1; q.cudaDev = 0; q.smCount = 132; q.wantChannels = -1; },
       "wantChannels = -1"},
  };
  for (const Case& c : cases) {
    p = good;
    c.spoil(p);
    CHECK(!peerInfoValid(p, 2, &why));
    CHECK_EQ(why, std::string(c.why));
  }
}

std::string hex(const uint8_t* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    snprintf(b, sizeof(b), "%02x", p[i]);
    s += b;
  }
  return s;
}

std::string sha256Hex(const std::string& msg, size_t pieces = 1) {
  Sha256 h;
  const size_t step = msg.size() / pieces + 1;  // fed in pieces: the buffering must not matter
  for (size_t at = 0; at < msg.size(); at += step) h.update(msg.data() + at, std::min(step, msg.size() - at));
  uint8_t out[kSha256Bytes];
  h.final(out);
  return hex(out, sizeof(out));
}

// FIPS 180-4's examples and RFC 4231's HMAC cases 1 and 6 (the values also
// agree with Python's hashlib and hmac).
TEST(sha256_and_hmac_vectors) {
  CHECK_EQ(sha256Hex(""), std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
  CHECK_EQ(sha256Hex("abc"), std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  const std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";  // 448 bits: padding spills a block
  CHECK_EQ(sha256Hex(two), std::string("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
  CHECK_EQ(sha256Hex(two, 7), sha256Hex(two));
  CHECK_EQ(sha256Hex(std::string(1000000, 'a'), 13),
           std::string("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
  uint8_t mac[kSha256Bytes];
  const std::vector<uint8_t> key1(20, 0x0b);
  hmacSha256(key1.data(), key1.size(), "Hi There", 8, mac);
  CHECK_EQ(hex(mac, sizeof(mac)), std::string("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"));
  const std::vector<uint8_t> key6(131, 0xaa);  // longer than a block: hashed first
  const std::string msg6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  hmacSha256(key6.data(), key6.size(), msg6.data(), msg6.size(), mac);
  CHECK_EQ(hex(mac, sizeof(mac)), std::string("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"));
  // The same message in parts (the root's proof MACs its fields so).
  HmacSha256 parts(key6.data(), key6.size());
  parts.update(msg6.data(), 5);
  parts.update(msg6.data() + 5, 0);
  parts.update(msg6.data() + 5, msg6.size() - 5);
  uint8_t again[kSha256Bytes];
  parts.final(again);
  CHECK_EQ(hex(again, sizeof(again)), hex(mac, sizeof(mac)));
}

TEST(same_subnet) {
  NetIf i;
  memset(&i, 0, sizeof(i));
  parseAddr("10.1.2.3:1", &i.addr);  // the ports do not matter (parseAddr takes [1, 65535])
  parseAddr("255.255.255.0:1", &i.mask);
  SockAddr in, out;
  parseAddr("10.1.2.200:5", &in);
  parseAddr("10.1.3.1:5", &out);
  CHECK(sameSubnet(i, in));
  CHECK(!sameSubnet(i, out));
  CHECK_EQ(subnetOf(i), std::string("10.1.2.0/24"));  // what topo/ pairs NICs by
}

TEST(conf_text) {
  auto m = parseConfText("# comment\nNCCL_DEBUG=INFO\n  NCCL_BUFFSIZE = 1M  # trailing\n\nbad line\nNCCL_DEBUG=WARN\n");
  CHECK_EQ(m.size(), 2u);
  CHECK_EQ(m["NCCL_DEBUG"], std::string("WARN"));  // later lines win
  CHECK_EQ(m["NCCL_BUFFSIZE"], std::string("1M"));
}

TEST(int_values) {
  int64_t v = 0;
  CHECK(parseIntValue("4M", &v));
  CHECK_EQ(v, 4ll << 20);
  CHECK(parseIntValue("0x10", &v));
  CHECK_EQ(v, 16);
  CHECK(parseIntValue(" 12 ", &v));
  CHECK_EQ(v, 12);
  CHECK(parseIntValue("-1", &v));
  CHECK_EQ(v, -1);
  CHECK(!parseIntValue("abc", &v));
  CHECK(!parseIntValue("", &v));
  CHECK(!parseIntValue("12x", &v));
  CHECK(!parseIntValue("18014398509483008K", &v));  // (2^54 + 1024) KiB: would wrap to 1 MiB
  CHECK(!parseIntValue("9223372036854775807G", &v));
}

TEST(param_precedence) {
  // env > NCCL_CONF_FILE > default
  char path[] = "/tmp/accl-conf-XXXXXX";
  int fd = mkstemp(path);
  const char* text = "NCCL_BUFFSIZE=1M\nACCL_TIMEOUT=77\nNCCL_SOCKET_IFNAME=lo\n";
  CHECK_EQ(write(fd, text, strlen(text)), static_cast<ssize_t>(strlen(text)));
  close(fd);
  setenv("NCCL_CONF_FILE", path, 1);
  setenv("ACCL_TIMEOUT", "5", 1);
  unsetenv("NCCL_BUFFSIZE");
  resetParams();
  CHECK_EQ(paramInt(Param::Timeout), 5);
  CHECK_EQ(paramInt(Param::BuffSize), 1 << 20);
  CHECK_EQ(std::string(paramString(Param::SocketIfname)), std::string("lo"));
  setenv("NCCL_BUFFSIZE", "garbage", 1);
  resetParams();
  CHECK_EQ(paramInt(Param::BuffSize), 1 << 20);  // invalid value: default, reported by dumpParams
  CHECK(dumpParams().find("NCCL_BUFFSIZE=1048576 (env (invalid, default used))") != std::string::npos);
  CHECK(paramProblems() == "NCCL_BUFFSIZE=garbage (env) is not an integer: the default, 1048576, is used\n");
  unsetenv("NCCL_CONF_FILE");
  unsetenv("ACCL_TIMEOUT");
  unsetenv("NCCL_BUFFSIZE");
  resetParams();
  CHECK_EQ(paramInt(Param::Timeout), 1800);
  unlink(path);
}

TEST(param_ranges_and_conf_files) {
  // A value outside its range gives way to the default and is said once.
  setenv("NCCL_BUFFSIZE", "99999999999999", 1);
  setenv("ACCL_CHUNKSIZE", "-4", 1);
  setenv("NCCL_CROSS_NIC", "2", 1);  // the top of its range: kept
  resetParams();
  CHECK_EQ(paramInt(Param::BuffSize), 1 << 20);
  CHECK_EQ(paramInt(Param::ChunkSize), 0);
  CHECK_EQ(paramInt(Param::CrossNic), 2);
  const std::string p = paramProblems();
  CHECK(p.find("NCCL_BUFFSIZE=99999999999999 (env) is outside [32768, 268435456]: the default, 1048576, is used\n") !=
        std::string::npos);
  CHECK(p.find("ACCL_CHUNKSIZE=-4 (env) is outside [0, 33554432]") != std::string::npos);
  CHECK(p.find("NCCL_CROSS_NIC") == std::string::npos);
  CHECK(dumpParams().find("NCCL_BUFFSIZE=1048576 (env (out of range, default used))") != std::string::npos);
  unsetenv("NCCL_BUFFSIZE");
  unsetenv("ACCL_CHUNKSIZE");
  unsetenv("NCCL_CROSS_NIC");
  // A configuration "file" that never ends, or is not a file, is not read.
  for (const char* path : {"/dev/zero", "/tmp"}) {
    setenv("NCCL_CONF_FILE", path, 1);
    resetParams();
    CHECK_EQ(paramInt(Param::Timeout), 1800);
    CHECK(paramProblems() == std::string(path) + " is not a regular file: ignored as a configuration file\n");
  }
  // Nor is one larger than 1 MiB.
  char path[] = "/tmp/accl-conf-XXXXXX";
  int fd = mkstemp(path);
  std::string big = "ACCL_TIMEOUT=7\n" + std::string((1 << 20) + 1, '#');
  CHECK_EQ(write(fd, big.data(), big.size()), static_cast<ssize_t>(big.size()));
  close(fd);
  setenv("NCCL_CONF_FILE", path, 1);
  resetParams();
  CHECK_EQ(paramInt(Param::Timeout), 1800);
  CHECK(paramProblems().find("is larger than 1 MiB: ignored") != std::string::npos);
  unlink(path);
  unsetenv("NCCL_CONF_FILE");
  resetParams();
  CHECK(paramProblems().empty());
}

TEST(debug_parsing) {
  CHECK(parseLogLevel("info", LogLevel::Warn) == LogLevel::Info);
  CHECK(parseLogLevel("TRACE", LogLevel::Warn) == LogLevel::Trace);
  CHECK(parseLogLevel("nonsense", LogLevel::Warn) == LogLevel::Warn);
  CHECK_EQ(parseSubsysMask("INIT,NET"), static_cast<uint64_t>(kInit | kNet));
  CHECK_EQ(parseSubsysMask("^COLL") & kColl, 0u);
  CHECK(parseSubsysMask("^COLL") & kNet);
  CHECK_EQ(parseSubsysMask("ALL"), static_cast<uint64_t>(kAll));
}

TEST(config_defaults_and_initializer) {
  CommConfig c;
  CHECK_EQ(readConfig(nullptr, &c), ncclSuccess);
  CHECK(c.blocking);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  CHECK_EQ(readConfig(&cfg, &c), ncclSuccess);
  CHECK(c.blocking);
  cfg.blocking = 0;
  cfg.commName = "trainer";
  CHECK_EQ(readConfig(&cfg, &c), ncclSuccess);
  CHECK(!c.blocking);
  CHECK_EQ(c.commName, std::string("trainer"));
}

TEST(config_rejects_bad_values) {
  CommConfig c;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0x12345678;
  CHECK_EQ(readConfig(&cfg, &c), ncclInvalidArgument);
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.size = 8;
  CHECK_EQ(readConfig(&cfg, &c), ncclInvalidArgument);
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.cgaClusterSize = -1;  // as NCCL: negative is refused, past 8 clamped
  CHECK_EQ(readConfig(&cfg, &c), ncclInvalidArgument);
  cfg.cgaClusterSize = 9;
  CHECK_EQ(readConfig(&cfg, &c), ncclSuccess);
  CHECK_EQ(c.cgaClusterSize, 8);
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.maxCTAs = 128;  // more than the channels: clamped, as NCCL
  CHECK_EQ(readConfig(&cfg, &c), ncclSuccess);
  CHECK_EQ(c.maxCTAs, 64);
  cfg.minCTAs = 0;
  CHECK_EQ(readConfig(&cfg, &c), ncclInvalidArgument);
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.minCTAs = 8;
  cfg.maxCTAs = 4;
  CHECK_EQ(readConfig(&cfg, &c), ncclInvalidArgument);
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 2;
  CHECK_EQ(readConfig(&cfg, &c), ncclInvalidArgument);
}

TEST(config_read_by_size_from_old_headers) {
  // A program built against NCCL 2.14's header passes a 40-byte config (fields up to
  // netName). Whatever lies beyond its size must be ignored, even if it is garbage.
  alignas(8) unsigned char buf[sizeof(ncclConfig_t)];
  memset(buf, 0x7f, sizeof(buf));
  ncclConfig_t* cfg = reinterpret_cast<ncclConfig_t*>(buf);
  cfg->size = 40;
  cfg->magic = 0xcafebeef;
  cfg->version = NCCL_VERSION(2, 14, 3);
  cfg->blocking = 0;
  cfg->cgaClusterSize = NCCL_CONFIG_UNDEF_INT;
  cfg->minCTAs = NCCL_CONFIG_UNDEF_INT;
  cfg->maxCTAs = NCCL_CONFIG_UNDEF_INT;
  cfg->netName = nullptr;
  CommConfig c;
  CHECK_EQ(readConfig(cfg, &c), ncclSuccess);
  CHECK(!c.blocking);
  CHECK(c.commName.empty());  // commName lies past byte 40: never read
  CHECK_EQ(c.splitShare, 0);
  // The same bytes with the full size: the garbage is now a field and is rejected.
  cfg->size = sizeof(ncclConfig_t);
  CHECK_EQ(readConfig(cfg, &c), ncclInvalidArgument);
}

TEST(comm_query_properties) {
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  CHECK_EQ(pncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ(pncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  memset(&props.rank, 0x7f, sizeof(props) - offsetof(ncclCommProperties_t, rank));
  CHECK_EQ(pncclCommQueryProperties(comm, &props), ncclSuccess);
  CHECK_EQ(props.rank, 0);
  CHECK_EQ(props.nRanks, 1);
  CHECK_EQ(props.cudaDev, -1);  // host mode (this test's build has no CUDA)
  CHECK_EQ(props.nvmlDev, -1);
  CHECK(!props.deviceApiSupport && !props.multimemSupport);
  CHECK(props.ginType == NCCL_GIN_TYPE_NONE && props.railedGinType == NCCL_GIN_TYPE_NONE);
  CHECK_EQ(props.nLsaTeams, 0);
  CHECK(props.hostRmaSupport);
  // An older header's shorter struct: nothing past its size is written.
  ncclCommProperties_t shortProps = NCCL_COMM_PROPERTIES_INITIALIZER;
  memset(&shortProps.rank, 0x7f, sizeof(shortProps) - offsetof(ncclCommProperties_t, rank));
  shortProps.size = offsetof(ncclCommProperties_t, cudaDev);
  CHECK_EQ(pncclCommQueryProperties(comm, &shortProps), ncclSuccess);
  CHECK_EQ(shortProps.nRanks, 1);
  CHECK_EQ(shortProps.cudaDev, 0x7f7f7f7f);
  // Not initialised, or no struct, or no communicator.
  ncclCommProperties_t raw;
  memset(&raw, 0, sizeof(raw));
  CHECK_EQ(pncclCommQueryProperties(comm, &raw), ncclInvalidArgument);
  CHECK(strstr(lastWarning(), "NCCL_COMM_PROPERTIES_INITIALIZER"));
  CHECK_EQ(pncclCommQueryProperties(comm, nullptr), ncclInvalidArgument);
  CHECK_EQ(pncclCommQueryProperties(nullptr, &props), ncclInvalidArgument);
  CHECK_EQ(pncclCommDestroy(comm), ncclSuccess);
}

TEST(gpu_pci_index) {
  char dir[] = "/tmp/accl-gpus-XXXXXX";
  CHECK(mkdtemp(dir) != nullptr);
  for (const char* gpu : {"0000:b3:00.0", "0000:18:00.0", "0001:01:00.0"})
    CHECK_EQ(mkdir((std::string(dir) + "/" + gpu).c_str(), 0700), 0);
  CHECK_EQ(gpuPciIndex(0, 0x18, 0, dir), 0);  // PCI order, not the directory's
  CHECK_EQ(gpuPciIndex(0, 0xb3, 0, dir), 1);
  CHECK_EQ(gpuPciIndex(1, 0x01, 0, dir), 2);
  CHECK_EQ(gpuPciIndex(0, 0x19, 0, dir), -1);
  CHECK_EQ(gpuPciIndex(0, 0x18, 0, "/nonexistent/accl"), -1);
  CHECK_EQ(system((std::string("rm -rf ") + dir).c_str()), 0);
}

// The kernels of one (datatype, op), or a failed check when there are none.
ReduceKernels kernels(ncclDataType_t t, OpKind op) {
  ReduceKernels k{};
  CHECK(hostKernels(t, op, &k));
  return k;
}

TEST(host_reduce) {
  int8_t a8[3] = {127, -128, 5}, b8[3] = {1, -1, 6}, d8[3];
  kernels(ncclInt8, OpKind::Sum).combine(d8, a8, b8, 3, nullptr);
  CHECK_EQ(static_cast<int>(d8[0]), -128);  // wraps, as NCCL's kernels do
  CHECK_EQ(static_cast<int>(d8[1]), 127);
  CHECK_EQ(static_cast<int>(d8[2]), 11);
  int32_t a[4] = {1, -5, 7, std::numeric_limits<int32_t>::max()}, b[4] = {2, 3, -9, 2}, d[4];
  kernels(ncclInt32, OpKind::Max).combine(d, a, b, 4, nullptr);
  CHECK_EQ(d[0], 2);
  CHECK_EQ(d[1], 3);
  CHECK_EQ(d[2], 7);
  kernels(ncclInt32, OpKind::Min).combine(d, a, b, 4, nullptr);
  CHECK_EQ(d[1], -5);
  kernels(ncclInt32, OpKind::Prod).combine(d, a, b, 4, nullptr);
  CHECK_EQ(d[2], -63);
  CHECK_EQ(d[3], -2);  // INT32_MAX * 2 wraps
  double x[2] = {0.5, 1e300}, y[2] = {0.25, 1e300}, z[2];
  kernels(ncclFloat64, OpKind::Sum).combine(z, x, y, 2, nullptr);
  CHECK_EQ(z[0], 0.75);
  uint64_t u[1] = {~0ull}, v[1] = {2}, w[1];
  kernels(ncclUint64, OpKind::Sum).combine(w, u, v, 1, nullptr);
  CHECK_EQ(w[0], 1u);
  CHECK_EQ(typeSize(ncclBfloat16), 2u);
  CHECK_EQ(typeSize(static_cast<ncclDataType_t>(99)), 0u);
}

TEST(premulsum_and_postdiv) {
  Scalar s;
  s.f = 0.25;
  float local[3] = {4, 8, -2}, peer[3] = {1, 1, 1}, out[3];
  ReduceKernels k = kernels(ncclFloat32, OpKind::PreMulSum);
  k.prepare(out, local, 3, &s);  // the first hop sends scalar * local
  CHECK_EQ(out[0], 1.0f);
  CHECK_EQ(out[2], -0.5f);
  k.combine(out, peer, local, 3, &s);  // peer + scalar * local
  CHECK_EQ(out[1], 3.0f);
  k.merge(out, peer, out, 3, &s);  // two partials: a plain sum
  CHECK_EQ(out[1], 4.0f);
  Scalar div;
  div.i = 3;
  int32_t sum[3] = {9, 10, -7};
  ReduceKernels avg = kernels(ncclInt32, OpKind::SumPostDiv);
  CHECK(avg.prepare == nullptr);
  avg.finish(sum, 3, &div);  // integer average divides after the sum (truncating, as C does)
  CHECK_EQ(sum[0], 3);
  CHECK_EQ(sum[1], 3);
  CHECK_EQ(sum[2], -2);
  ReduceKernels none{};
  CHECK(!hostKernels(ncclFloat32, OpKind::SumPostDiv, &none));  // float avg is PreMulSum(1/n)
}

// Runs f in the floating-point environment env: 0 the default, 1 FTZ and DAZ
// set (x86), 2 rounding down, 3 rounding up. false where env is not there.
template <typename F>
bool inFpEnv(int env, F f) {
#if defined(__x86_64__)
  const unsigned csr = _mm_getcsr();
  if (env == 1) _mm_setcsr(csr | 0x8040);  // FTZ | DAZ
#else
  if (env == 1) return false;
#endif
  const int round = fegetround();
  if (env >= 2 && fesetround(env == 2 ? FE_DOWNWARD : FE_UPWARD) != 0) return false;
  f();
  fesetround(round);
#if defined(__x86_64__)
  _mm_setcsr(csr);
#endif
  return true;
}

// float bits that exercise every rounding decision of a conversion to a
// narrower format: each sign and exponent, with mantissas a·2^k, a·2^k ± 1
// (a < 8, every k: the halfway points, their neighbours and the sticky bits of
// each target's precision and of each subnormal shift), plus a pseudo-random
// sweep. (All 2^32 inputs were compared once by hand: no difference.)
std::vector<uint32_t> roundingProbes() {
  std::vector<uint32_t> v;
  for (uint32_t se = 0; se < 512; ++se)
    for (uint32_t a = 0; a < 8; ++a)
      for (int k = 0; k < 23; ++k)
        for (int d = -1; d <= 1; ++d) v.push_back(se << 23 | (((a << k) + d) & 0x7fffffu));
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 1 << 20; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v.push_back(static_cast<uint32_t>(x));
  }
  return v;
}

template <typename T>
void checkVecConversions(const std::vector<uint32_t>& probes) {
  using Bits = decltype(T::bits);
  uint32_t firstEncoding = ~0u, firstFloat = ~0u;  // the first input that differs, if any
  for (uint32_t b = 0; b < (1u << (8 * sizeof(Bits))) && firstEncoding == ~0u; ++b) {
    const T t{static_cast<Bits>(b)};
    if (lowp_detail::bitsOf(lowp_vec::toFloat(t)) != lowp_detail::bitsOf(toFloat(t))) firstEncoding = b;
  }
  for (uint32_t u : probes) {
    const float f = lowp_detail::floatOf(u);
    if (lowp_vec::fromFloat<T>(f).bits != fromFloat<T>(f).bits ||
        lowp_vec::roundResult<T>(f).bits != roundResult<T>(f).bits) {
      firstFloat = u;
      break;
    }
  }
  CHECK_EQ(firstEncoding, ~0u);
  CHECK_EQ(firstFloat, ~0u);
}

// lowp_vec.h's conversions give lowp.h's bits (lowp.h is checked against
// ml_dtypes and CUDA's rules by tests/native/test_lowp.py).
TEST(lowp_vec_matches_lowp) {
  const std::vector<uint32_t> probes = roundingProbes();
  for (int env = 0; env < 4; ++env) {
    inFpEnv(env, [&] {
      checkVecConversions<half_t>(probes);
      checkVecConversions<bf16_t>(probes);
      checkVecConversions<fp8e4m3_t>(probes);
      checkVecConversions<fp8e5m2_t>(probes);
    });
  }
  // A zero stays a zero of its sign in every environment (x - x is -0 rounding
  // down). Through volatiles: constants would be folded rounding to nearest.
  for (int env = 0; env < 4; ++env) {
    inFpEnv(env, [&] {
      volatile uint16_t plus = 0, minus = 0x8000;
      volatile uint8_t plus8 = 0, minus8 = 0x80;
      CHECK_EQ(lowp_detail::bitsOf(toFloat(half_t{plus})), 0u);
      CHECK_EQ(lowp_detail::bitsOf(lowp_vec::toFloat(half_t{plus})), 0u);
      CHECK_EQ(lowp_detail::bitsOf(lowp_vec::toFloat(half_t{minus})), 0x80000000u);
      CHECK_EQ(lowp_detail::bitsOf(toFloat(fp8e4m3_t{plus8})), 0u);
      CHECK_EQ(lowp_detail::bitsOf(lowp_vec::toFloat(fp8e4m3_t{plus8})), 0u);
      CHECK_EQ(lowp_detail::bitsOf(lowp_vec::toFloat(fp8e4m3_t{minus8})), 0x80000000u);
    });
  }
}

// The host kernels of a low-precision type give, element by element, what
// lowp.h's operators give: fp8 on every pair of encodings, the 16-bit types on
// every encoding against special and sampled partners.
// In floating-point environment env (inFpEnv): the 16-bit types' results
// follow its float arithmetic, as lowp.h's do; fp8's are round-to-nearest's
// in every one (the tables, made in that mode).
template <typename T>
void checkLowpKernels(HostIsa isa, ncclDataType_t type, int env) {
  using Bits = decltype(T::bits);
  const uint32_t count = 1u << (8 * sizeof(Bits));
  std::vector<Bits> partners;
  if (sizeof(Bits) == 1) {
    for (uint32_t b = 0; b < count; ++b) partners.push_back(static_cast<Bits>(b));
  } else {
    for (Bits b : {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x3f80, 0x7bff, 0xfbff, 0x7c00,
                   0xfc00, 0x7e00, 0x7f7f, 0x7f80, 0xff80, 0x7fc0, 0x7fff, 0x3555, 0x1234})
      partners.push_back(b);
    for (uint32_t i = 0; i < 24; ++i) partners.push_back(static_cast<Bits>(i * 40503u + 977u));
  }
  std::vector<Bits> a(count), b(count), got(count), got2(count), got3(count), moved(count);
  Scalar s;
  s.f = 0.3;
  const T k = fromFloat<T>(0.3f);
  for (OpKind op : {OpKind::Sum, OpKind::Prod, OpKind::Max, OpKind::Min, OpKind::PreMulSum}) {
    ReduceKernels kern{};
    CHECK(hostKernelsOf(isa, type, op, &kern));
    for (Bits p : partners) {
      for (uint32_t i = 0; i < count; ++i) a[i] = static_cast<Bits>(i), b[i] = p;
      // Every encoding as the first operand, p as the second; for PreMulSum, whose
      // operands differ in role, also the other way round.
      for (int swapped = 0; swapped < (op == OpKind::PreMulSum ? 2 : 1); ++swapped) {
        const Bits* x = swapped ? b.data() : a.data();
        const Bits* y = swapped ? a.data() : b.data();
        if (!inFpEnv(env, [&] {
              kern.combine(got.data(), x, y, count, &s);
              if (kern.combine2) {  // both destinations get the result
                kern.combine2(got2.data(), got3.data(), x, y, count, &s);
                CHECK(got2 == got && got3 == got);
              }
              // One element on (an odd length, unaligned: the vector loops' tails), and in place.
              kern.combine(moved.data(), x + 1, y + 1, count - 1, &s);
              CHECK(std::equal(got.begin() + 1, got.end(), moved.begin()));
              std::copy(x, x + count, moved.begin());
              kern.combine(moved.data(), moved.data(), y, count, &s);
              CHECK(moved == got);
              if (kern.prepare) kern.prepare(got2.data(), y, count, &s);  // T(local * scalar)
            }))
          return;  // no such environment here
        bool same = true;
        inFpEnv(sizeof(Bits) == 1 ? 0 : env, [&] {
        for (uint32_t i = 0; i < count && same; ++i) {
          const T xi{x[i]}, yi{y[i]};
          T want{};
          switch (op) {
            case OpKind::Sum: want = OpSum<T>()(xi, yi); break;
            case OpKind::Prod: want = OpProd<T>()(xi, yi); break;
            case OpKind::Max: want = OpMax<T>()(xi, yi); break;
            case OpKind::Min: want = OpMin<T>()(xi, yi); break;
            default: want = OpSum<T>()(xi, OpProd<T>()(yi, k)); break;  // peer + T(local * scalar)
          }
          const bool prepared = !kern.prepare || got2[i] == OpProd<T>()(yi, k).bits;
          if (got[i] != want.bits || !prepared) {  // name the first difference, and stop
            char what[112];
            snprintf(what, sizeof what, "%s op %d%s, 0x%x with 0x%x: 0x%x, lowp.h 0x%x", hostIsaName(isa),
                     static_cast<int>(op), prepared ? "" : " (prepare)", unsigned(x[i]), unsigned(y[i]),
                     unsigned(got[i]), unsigned(want.bits));
            CHECK_EQ(std::string(what), std::string());
            same = false;
          }
        }
        });
        if (!same) return;
      }
    }
  }
}

// Every instruction set this CPU runs, in every floating-point environment;
// rounding down first, so that the fp8 tables are made in it (they must not
// depend on it).
TEST(host_reduce_lowp_matches_lowp) {
  for (HostIsa isa : {HostIsa::Base, HostIsa::X86v3, HostIsa::X86v4}) {
    if (!hostIsaRuns(isa)) continue;
    for (int env : {2, 3, 0, 1}) {
      checkLowpKernels<half_t>(isa, ncclFloat16, env);
      checkLowpKernels<bf16_t>(isa, ncclBfloat16, env);
      checkLowpKernels<fp8e4m3_t>(isa, ncclFloat8e4m3, env);
      checkLowpKernels<fp8e5m2_t>(isa, ncclFloat8e5m2, env);
    }
  }
}

// float and double max and min are fmax and fmin: a NaN operand is ignored;
// on a tie of zeros the second operand wins, as x86-64 glibc's fmaxf (maxss).
TEST(host_reduce_float_max_min_ignore_nan) {
  volatile float pz = 0.0f, nz = -0.0f;  // volatile: the kernels see them, not the folder
  float zp[2] = {pz, nz}, zq[2] = {nz, pz}, zr[2];
  for (OpKind op : {OpKind::Max, OpKind::Min}) {
    kernels(ncclFloat32, op).combine(zr, zp, zq, 2, nullptr);
    CHECK(std::signbit(zr[0]) && !std::signbit(zr[1]));
  }
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  float a[6] = {1, nan, nan, -inf, 3, -0.5f}, b[6] = {2, 5, nan, 7, nan, -0.25f}, d[6];
  kernels(ncclFloat32, OpKind::Max).combine(d, a, b, 6, nullptr);
  CHECK_EQ(d[0], 2.0f);
  CHECK_EQ(d[1], 5.0f);
  CHECK(d[2] != d[2]);
  CHECK_EQ(d[3], 7.0f);
  CHECK_EQ(d[4], 3.0f);
  CHECK_EQ(d[5], -0.25f);
  kernels(ncclFloat32, OpKind::Min).combine(d, a, b, 6, nullptr);
  CHECK_EQ(d[0], 1.0f);
  CHECK_EQ(d[1], 5.0f);
  CHECK(d[2] != d[2]);
  CHECK_EQ(d[3], -inf);
  CHECK_EQ(d[4], 3.0f);
  CHECK_EQ(d[5], -0.5f);
  const double dn = std::numeric_limits<double>::quiet_NaN();
  double x[3] = {dn, 4, -1}, y[3] = {-2, dn, -3}, z[3];
  kernels(ncclFloat64, OpKind::Max).combine(z, x, y, 3, nullptr);
  CHECK_EQ(z[0], -2.0);
  CHECK_EQ(z[1], 4.0);
  CHECK_EQ(z[2], -1.0);
  kernels(ncclFloat64, OpKind::Min).combine(z, x, y, 3, nullptr);
  CHECK_EQ(z[0], -2.0);
  CHECK_EQ(z[1], 4.0);
  CHECK_EQ(z[2], -3.0);
}

TEST(double_binary_tree_shape) {
  for (int n = 1; n <= 17; ++n) {
    for (int t = 0; t < 2; ++t) {
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        TreeLinks l = treeLinks(n, r, t);
        if (l.parent < 0) ++roots;
        else {  // my parent lists me as a child
          TreeLinks p = treeLinks(n, l.parent, t);
          CHECK(p.children[0] == r || p.children[1] == r);
        }
        for (int c : l.children)
          if (c >= 0) CHECK_EQ(treeLinks(n, c, t).parent, r);
        int hops = 0, x = r;  // walking up reaches the root: no cycles
        while (x >= 0 && hops <= n) { x = treeLinks(n, x, t).parent; ++hops; }
        CHECK(hops <= n);
      }
      CHECK_EQ(roots, 1);
    }
    if (n >= 4) {  // the two trees differ: some leaf of tree 0 is an inner node of tree 1
      bool differ = false;
      for (int r = 0; r < n; ++r) {
        TreeLinks a = treeLinks(n, r, 0), b = treeLinks(n, r, 1);
        if (a.children[0] < 0 && a.children[1] < 0 && (b.children[0] >= 0 || b.children[1] >= 0)) differ = true;
      }
      CHECK(differ);
    }
  }
}

TEST(nccl_algo_syntax) {
  const int ar = static_cast<int>(CollKind::AllReduce), bc = static_cast<int>(CollKind::Broadcast);
  AlgoMask m;
  std::string err;
  CHECK(parseAlgoSpec("ring", &m, &err));
  CHECK(m.ring[ar] && !m.tree[ar]);
  m = AlgoMask();
  CHECK(parseAlgoSpec("^tree", &m, &err));
  CHECK(m.ring[ar] && !m.tree[ar]);
  m = AlgoMask();
  CHECK(parseAlgoSpec("allreduce:tree;broadcast:ring", &m, &err));
  CHECK(!m.ring[ar] && m.tree[ar]);
  CHECK(m.ring[bc] && !m.tree[bc]);
  m = AlgoMask();
  CHECK(parseAlgoSpec("Tree,RING", &m, &err));  // case-insensitive, as NCCL
  CHECK(m.ring[ar] && m.tree[ar]);
  m = AlgoMask();
  CHECK(parseAlgoSpec("nvls", &m, &err));  // a known algorithm ACCL lacks: nothing left
  CHECK(!m.ring[ar] && !m.tree[ar]);
  CHECK(!parseAlgoSpec("bogus", &m, &err));
  CHECK(err.find("bogus") != std::string::npos);
  CHECK(!parseAlgoSpec("allreduce:bogus", &m, &err));
  CHECK(!parseAlgoSpec("allgarther:ring", &m, &err));
  CHECK(parseProtoSpec("LL128,Simple", &err));
  CHECK(parseProtoSpec("^LL", &err));
  CHECK(parseProtoSpec("allreduce:simple", &err));
  CHECK(!parseProtoSpec("fast", &err));
}

TEST(shm_segment_smaller_than_expected) {
  // The two sides of a FIFO sized its segment differently: opening it is an
  // error that says so, not a SIGBUS at the first touch past its end.
  ncclComm comm;
  comm.rank = 0;
  const std::string name = "/accl-unit-" + std::to_string(getpid());
  void* created = nullptr;
  void* opened = nullptr;
  CHECK(shmSegmentCreate(&comm, "a test segment", name, 4096, &created) == ncclSuccess);
  CHECK(shmSegmentOpen(&comm, "a test segment", name, 8192, &opened) == ncclInternalError);
  CHECK(opened == nullptr);
  CHECK(shmSegmentOpen(&comm, "a test segment", name, 4096, &opened) == ncclSuccess);
  munmap(opened, 4096);
  munmap(created, 4096);
  shm_unlink(name.c_str());
}

TEST(tuner_model) {
  // More bytes never predict less time; the tree's log-depth latency wins small
  // messages on many ranks, the ring's lower per-byte cost wins large ones.
  for (int n : {2, 5, 16}) {
    double last = 0;
    for (size_t b = 8; b <= (1u << 28); b *= 4) {
      double t = predictUs(CollKind::AllReduce, Algo::Ring, b, n, 1);
      CHECK(t >= last);
      last = t;
    }
  }
  CHECK(predictUs(CollKind::AllReduce, Algo::Tree, 8, 16, 1) < predictUs(CollKind::AllReduce, Algo::Ring, 8, 16, 1));
  CHECK(predictUs(CollKind::AllReduce, Algo::Ring, 1 << 28, 2, 1) <= predictUs(CollKind::AllReduce, Algo::Tree, 1 << 28, 2, 1));
  // Two ranks: the exchange (the tree there) takes one hop; between hosts it
  // puts the same bytes on the wire as the ring, so it wins at every size.
  for (int hosts : {1, 2})
    CHECK(predictUs(CollKind::AllReduce, Algo::Tree, 8, 2, hosts) < predictUs(CollKind::AllReduce, Algo::Ring, 8, 2, hosts));
  CHECK(predictUs(CollKind::AllReduce, Algo::Tree, 1 << 28, 2, 2) < predictUs(CollKind::AllReduce, Algo::Ring, 1 << 28, 2, 2));
  CHECK(predictUs(CollKind::AllReduce, Algo::Ring, 1 << 20, 4, 2) > predictUs(CollKind::AllReduce, Algo::Ring, 1 << 20, 4, 1));
}


// The shared registrations' table (coll/reg_table.h): a rank adds and kills
// entries; a peer's mirror maps what is new and unmaps what died, through
// callbacks that record what they were asked.
struct MirrorLog {
  std::vector<std::string> calls;  // "open place id base" / "close place", in order
  uint32_t failId = ~0u;           // open fails for this id
  void refresh(accl::RegMirror& m, const accl::RegTable& t) {
    m.refresh(
        t,
        [&](int place, uint32_t id, const char* handle, uint64_t base) {
          calls.push_back("open " + std::to_string(place) + " " + std::to_string(id) + " " + std::to_string(base) +
                          " " + std::string(handle, 3));
          return id != failId;
        },
        [&](int place) { calls.push_back("close " + std::to_string(place)); });
  }
};

uint32_t addOrDie(accl::RegTable* t, uint64_t base) {
  char handle[accl::kRegHandleBytes] = {};
  snprintf(handle, sizeof handle, "h%02d", static_cast<int>(base % 100));
  uint32_t id = ~0u;
  CHECK(accl::regAdd(t, handle, base, &id, [](int, uint32_t) { return true; }));
  return id;
}

TEST(reg_table_add_kill_mirror) {
  auto t = std::make_unique<RegTable>();
  RegMirror m;
  MirrorLog log;
  CHECK_EQ(addOrDie(t.get(), 10), 0u);
  CHECK_EQ(addOrDie(t.get(), 11), 1u);
  CHECK_EQ(addOrDie(t.get(), 12), 2u);
  log.refresh(m, *t);
  CHECK_EQ(log.calls.size(), 3u);
  if (log.calls.size() == 3) CHECK_EQ(log.calls[1], std::string("open 1 1 11 h11"));
  CHECK_EQ(m.watermark(), 3u);
  log.calls.clear();
  regKill(t.get(), 1);
  log.refresh(m, *t);
  CHECK_EQ(log.calls.size(), 1u);
  if (!log.calls.empty()) CHECK_EQ(log.calls[0], std::string("close 1"));
  CHECK_EQ(m.watermark(), 3u);
  log.calls.clear();
  log.refresh(m, *t);  // nothing new
  CHECK(log.calls.empty());
}

TEST(reg_table_skips_live_places_and_reuses_dead_ones) {
  auto t = std::make_unique<RegTable>();
  RegMirror m;
  MirrorLog log;
  CHECK_EQ(addOrDie(t.get(), 1000), 0u);  // lives throughout, at place 0
  log.refresh(m, *t);
  // Ids 1..255 come and go, unseen by the mirror in between.
  for (uint32_t id = 1; id < static_cast<uint32_t>(kRegPlaces); ++id) {
    CHECK_EQ(addOrDie(t.get(), 2000 + id), id);
    regKill(t.get(), id);
  }
  // Id 256's place (0) is live: the next is 257, at place 1.
  CHECK_EQ(addOrDie(t.get(), 3000), 257u);
  CHECK_EQ(t->count.load(), 258u);
  log.calls.clear();
  log.refresh(m, *t);
  CHECK_EQ(log.calls.size(), 1u);  // 1..255 died unseen, 256 never was: only 257 is mapped
  if (!log.calls.empty()) CHECK_EQ(log.calls[0], std::string("open 1 257 3000 h00"));
  CHECK_EQ(m.watermark(), 258u);
  // 257 dies and a new entry takes its place (1) again: unmapped, then mapped.
  regKill(t.get(), 257);
  for (uint32_t id = 258; id < 258 + kRegPlaces - 2; ++id) {  // places 2..255, each killed
    CHECK_EQ(addOrDie(t.get(), 4000), id);
    regKill(t.get(), id);
  }
  CHECK_EQ(addOrDie(t.get(), 5000), 513u);  // 512's place (0) is live; 513's (1) is free
  log.calls.clear();
  log.refresh(m, *t);
  CHECK_EQ(log.calls.size(), 2u);
  if (log.calls.size() == 2) {
    CHECK_EQ(log.calls[0], std::string("close 1"));
    CHECK_EQ(log.calls[1], std::string("open 1 513 5000 h00"));
  }
  int mapped = 0;
  m.forEachMapped([&](int) { ++mapped; });
  CHECK_EQ(mapped, 2);  // ids 0 and 513
}

TEST(reg_table_reuse_seen_before_its_death) {
  // The mirror read `deaths` just before the owner killed id 0 and reused its
  // place: the scan itself unmaps the old entry before it maps the new one.
  auto t = std::make_unique<RegTable>();
  RegMirror m;
  MirrorLog log;
  addOrDie(t.get(), 40);
  log.refresh(m, *t);
  for (uint32_t id = 1; id < static_cast<uint32_t>(kRegPlaces); ++id) {
    CHECK_EQ(addOrDie(t.get(), 41), id);
    regKill(t.get(), id);
  }
  regKill(t.get(), 0);
  CHECK_EQ(addOrDie(t.get(), 42), static_cast<uint32_t>(kRegPlaces));  // place 0 again
  t->deaths.store(0);  // as the mirror last read it
  log.calls.clear();
  log.refresh(m, *t);
  CHECK_EQ(log.calls.size(), 2u);
  if (log.calls.size() == 2) {
    CHECK_EQ(log.calls[0], std::string("close 0"));
    CHECK_EQ(log.calls[1], "open 0 " + std::to_string(kRegPlaces) + " 42 h42");
  }
}

TEST(reg_table_full_and_refused) {
  auto t = std::make_unique<RegTable>();
  for (int i = 0; i < kRegPlaces; ++i) addOrDie(t.get(), 7);
  char handle[kRegHandleBytes] = {};
  uint32_t id = 0;
  CHECK(!regAdd(t.get(), handle, 7, &id, [](int, uint32_t) { return true; }));  // every place lives
  regKill(t.get(), 5);
  CHECK(!regAdd(t.get(), handle, 7, &id, [](int, uint32_t) { return false; }));  // the owner's device write failed
  CHECK_EQ(t->count.load(), static_cast<uint32_t>(kRegPlaces));
  CHECK_EQ(t->e[5].id.load(), 5u);  // untouched: still the dead entry
  CHECK_EQ(t->e[5].live.load(), 0u);
  CHECK(regAdd(t.get(), handle, 7, &id, [](int place, uint32_t) { return place == 5; }));
  CHECK_EQ(id, static_cast<uint32_t>(kRegPlaces + 5));
}

TEST(reg_table_mirror_stuck_after_failed_open) {
  auto t = std::make_unique<RegTable>();
  RegMirror m;
  MirrorLog log;
  log.failId = 1;
  for (int i = 0; i < 3; ++i) addOrDie(t.get(), 20 + i);
  log.refresh(m, *t);
  CHECK(m.stuck());
  CHECK_EQ(m.watermark(), 1u);  // id 0 mapped; 1 failed; 2 never tried
  CHECK_EQ(log.calls.size(), 2u);
  log.calls.clear();
  addOrDie(t.get(), 30);
  log.refresh(m, *t);
  CHECK(log.calls.empty());
  CHECK_EQ(m.watermark(), 1u);
  regKill(t.get(), 0);  // stuck maps nothing more, but still unmaps what dies
  log.refresh(m, *t);
  CHECK_EQ(log.calls.size(), 1u);
  if (!log.calls.empty()) CHECK_EQ(log.calls[0], std::string("close 0"));
}

// Staged calls between hosts in chunks (coll/dev_staged.cc): every rank cuts
// a call with this rule, so it must give whole lines, at most
// kMaxStageChunks chunks covering the count, and the count itself (whole)
// for calls that fit one chunk, for kinds never cut, and with chunks off.
TEST(stage_chunk_elems) {
  using accl::CollArgs;
  using accl::CollKind;
  const CollKind cut[] = {CollKind::AllReduce, CollKind::Broadcast, CollKind::Reduce, CollKind::AllGather,
                          CollKind::ReduceScatter};
  const ncclDataType_t types[] = {ncclUint8, ncclFloat16, ncclFloat32, ncclFloat64};
  const size_t counts[] = {1, 7, 100, 8191, 8192, 8193, 100003, 1 << 20, 123456789, size_t{1} << 33};
  for (int nranks : {1, 2, 3, 8}) {
    for (CollKind kind : cut) {
      for (ncclDataType_t type : types) {
        for (int64_t chunk : {int64_t{64}, int64_t{65536}, int64_t{4} << 20}) {
          for (size_t count : counts) {
            CollArgs a{};
            a.kind = kind;
            a.type = type;
            a.count = count;
            const size_t es = accl::typeSize(type), line = 64 / es;
            const size_t rows = kind == CollKind::AllGather || kind == CollKind::ReduceScatter ? nranks : 1;
            const size_t per = accl::stageChunkElems(a, nranks, chunk);
            const size_t chunks = (count + per - 1) / per;
            if (count * es * rows <= static_cast<size_t>(chunk)) CHECK_EQ(per, count);  // fits one chunk: whole
            if (per == count) continue;
            CHECK(per > 0 && per < count);
            CHECK_EQ(per % line, size_t{0});
            CHECK(chunks <= accl::kMaxStageChunks);
            // About the asked size: not larger unless the cap or a line asks for it.
            if (per * es * rows > static_cast<size_t>(chunk) + 64 * rows)
              CHECK(per - line < (count + accl::kMaxStageChunks - 1) / accl::kMaxStageChunks);
          }
        }
      }
    }
  }
  CollArgs a{};
  a.kind = CollKind::AllReduce;
  a.type = ncclFloat32;
  a.count = 1 << 20;
  CHECK_EQ(accl::stageChunkElems(a, 2, 0), a.count);   // off
  CHECK_EQ(accl::stageChunkElems(a, 2, -5), a.count);  // off
  CHECK_EQ(accl::stageChunkElems(a, 2, 65536), size_t{16384});
  for (CollKind kind : {CollKind::Send, CollKind::Recv, CollKind::AllToAll, CollKind::Gather, CollKind::Scatter}) {
    a.kind = kind;
    CHECK_EQ(accl::stageChunkElems(a, 2, 65536), a.count);  // never cut
  }
}

// Rank 0 of a two-rank communicator of this process, and its direct slots in
// private memory (the HostDirect made over them unmaps them when it goes).
void* twoRankDirect(ncclComm* comm, size_t* bytes) {
  comm->nranks = 2;
  comm->rank = 0;
  comm->name = "unit";
  comm->peers.resize(2);
  for (auto& p : comm->peers) p.pid = getpid();
  *bytes = 2 * sizeof(accl::Slot);
  void* map = mmap(nullptr, *bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(map != MAP_FAILED);
  return map == MAP_FAILED ? nullptr : map;
}

// The direct collectives' wait (coll/host_direct_wait.h) with rank 1 played
// by the predicate: between one of the waiter's looks at its slot and the
// next, the peer publishes the call and then stops (it finished and destroyed
// its communicator). Whichever look that falls after, the wait must see a
// peer that got there, not a stopped one. A peer that stops without
// publishing must end the wait with an error.
TEST(direct_wait_sees_a_peer_that_got_there_before_it_stopped) {
  ncclComm comm;
  size_t bytes = 0;
  void* map = twoRankDirect(&comm, &bytes);
  if (!map) return;
  {
    accl::HostDirect d(&comm, map, bytes, 0);  // unmaps the slots when it goes
    accl::Slot& peer = d.slots[1];
    for (bool publishes : {true, false}) {
      for (int at = 1; at <= 200; ++at) {  // the look after which the peer acts
        peer.published.store(0);
        peer.failed.store(0);
        int looks = 0;
        auto ready = [&](const accl::Slot& s) {
          if (&s != &peer) return true;
          const bool r = s.published.load() >= 1;
          if (++looks == at) {  // the peer acts right after this look
            if (publishes) peer.published.store(1);
            peer.failed.store(1);
          }
          return r;
        };
        const ncclResult_t r = accl::waitAll(&comm, d, "test", "to start", ready);
        if (publishes && r != ncclSuccess) {
          fprintf(stderr, "a peer that published after look %d was judged stopped\n", at);
          CHECK(r == ncclSuccess);
          break;
        }
        if (!publishes && r != ncclRemoteError) {
          fprintf(stderr, "a peer that stopped after look %d without publishing: %d\n", at, static_cast<int>(r));
          CHECK(r == ncclRemoteError);
          break;
        }
      }
    }
  }
}

// The first known cause of a failure stays: a rank that finds a peer stopped
// (here the direct wait) after another cause was recorded must not replace it,
// nor may an abort with a later or unknown cause replace a FIFO's.
TEST(first_failure_cause_stays) {
  ncclComm comm;
  size_t bytes = 0;
  void* map = twoRankDirect(&comm, &bytes);
  if (!map) return;
  {
    accl::HostDirect d(&comm, map, bytes, 0);
    d.slots[1].failed.store(1);  // rank 1 stopped without publishing
    auto ready = [&](const accl::Slot& s) { return &s != &d.slots[1]; };
    CHECK_EQ(static_cast<int>(accl::waitAll(&comm, d, "test", "to start", ready)), static_cast<int>(ncclRemoteError));
    CHECK_EQ(comm.failedRank.load(), 1);  // none known before: the wait names rank 1
    comm.failedRank.store(7);
    CHECK_EQ(static_cast<int>(accl::waitAll(&comm, d, "test", "to start", ready)), static_cast<int>(ncclRemoteError));
    CHECK_EQ(comm.failedRank.load(), 7);
  }
  alignas(64) static unsigned char mem[4096 + accl::kSlots * 64];  // fifoBytes(64)
  accl::Fifo f;
  accl::fifoInit(mem, 64, &f);
  accl::fifoAbort(f.ctrl, -1);
  CHECK_EQ(f.ctrl->abort.load(), 1u);
  CHECK_EQ(f.ctrl->failedRank.load(), -1);
  accl::fifoAbort(f.ctrl, 2);
  accl::fifoAbort(f.ctrl, 3);
  accl::fifoAbort(f.ctrl, -1);
  CHECK_EQ(f.ctrl->failedRank.load(), 2);
}

// A walk over a communicator's connections (commSetError from a proxy that
// failed) may still be under way when commFree takes the connections out to
// destroy them: the destruction must wait for it, not free what it walks.
TEST(connections_outlive_the_walks_that_found_them) {
  struct Fake : accl::Connection {
    std::atomic<bool>* gone;
    explicit Fake(std::atomic<bool>* g) : gone(g) {}
    void abort(int) override {}
    ~Fake() override { gone->store(true); }
  };
  std::atomic<bool> gone[2] = {{false}, {false}};
  ncclComm comm;
  comm.sendConns[{1, 0}] = std::make_unique<Fake>(&gone[0]);
  comm.recvConns[{1, 0}] = std::make_unique<Fake>(&gone[1]);
  std::map<accl::Connection*, int> which;
  which[comm.sendConns.begin()->second.get()] = 0;
  which[comm.recvConns.begin()->second.get()] = 1;
  std::atomic<bool> walking{false};
  std::atomic<int> sawGone{0};
  std::thread walker([&] {
    accl::forEachConnection(&comm, [&](accl::Connection* c) {
      walking.store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(60));
      if (gone[which[c]].load()) sawGone.fetch_add(1);  // by its own flag: the object itself may be freed
    });
  });
  while (!walking.load()) std::this_thread::yield();
  {
    std::vector<accl::ConnPtr> taken;
    CHECK(accl::commTakeConnections(&comm, &taken));
  }
  walker.join();
  CHECK_EQ(sawGone.load(), 0);
  CHECK(gone[0].load() && gone[1].load());
  CHECK(comm.sendConns.empty() && comm.recvConns.empty());
}

// A group's sends and receives that one launch may move (coll/permutation.h):
// each rank sends to one rank and receives from one, and the two agree.
TEST(sends_and_receives_form_a_permutation) {
  std::vector<char> mem(1 << 12);
  auto ring = [&](int n, size_t bytes, bool inPlace) {
    std::vector<accl::RankSendRecv> r(n);
    for (int k = 0; k < n; ++k) {
      r[k].sendTo = (k + 1) % n;
      r[k].recvFrom = (k + n - 1) % n;
      r[k].sendBytes = r[k].recvBytes = bytes;
      r[k].send = mem.data() + 200 * k;
      r[k].recv = inPlace ? r[k].send : mem.data() + 2000 + 200 * k;
    }
    return r;
  };
  CHECK(accl::formsPermutation(ring(4, 100, true)));
  CHECK(accl::formsPermutation(ring(4, 100, false)));
  CHECK(accl::formsPermutation(ring(1, 100, true)));  // to self
  auto pairs = ring(4, 100, false);  // 0 <-> 1, 2 <-> 3
  for (int k = 0; k < 4; ++k) pairs[k].sendTo = pairs[k].recvFrom = k ^ 1;
  CHECK(accl::formsPermutation(pairs));
  auto twoToOne = ring(3, 100, false);  // ranks 0 and 1 both send to 2: rank 2 receives from 1 only
  twoToOne[0].sendTo = 2;
  twoToOne[1].recvFrom = 2;  // still one receive per rank, but nobody sends to 1
  CHECK(!accl::formsPermutation(twoToOne));
  auto wrongSource = ring(4, 100, false);
  wrongSource[2].recvFrom = 0;  // rank 1 sends to 2, which receives from 0
  CHECK(!accl::formsPermutation(wrongSource));
  auto sizes = ring(4, 100, false);
  sizes[3].recvBytes = 96;
  CHECK(!accl::formsPermutation(sizes));
  CHECK(!accl::formsPermutation(ring(4, 0, false)));
  auto overlap = ring(4, 100, false);
  overlap[1].recv = static_cast<const char*>(overlap[1].send) + 50;  // neither the same nor apart
  CHECK(!accl::formsPermutation(overlap));
  auto slots = ring(4, 100, false);
  slots[0].direct = false;  // ACCL_P2P_DIRECT keeps rank 0's send on the slots
  CHECK(!accl::formsPermutation(slots));
  auto self = ring(1, 100, false);
  self[0].direct = false;  // a copy to self needs no peer's permission
  CHECK(accl::formsPermutation(self));
  auto outside = ring(4, 100, false);
  outside[3].sendTo = 4;
  CHECK(!accl::formsPermutation(outside));
  CHECK(!accl::formsPermutation({}));
}

}  // namespace

int main(int argc, char** argv) {
  int passed = 0, failed = 0;
  for (const Test& t : tests()) {
    if (argc > 1 && strcmp(argv[1], t.name) != 0) continue;
    int before = failures;
    t.fn();
    bool ok = failures == before;
    printf("%s %s\n", ok ? "ok  " : "FAIL", t.name);
    (ok ? passed : failed)++;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
