// The door of every ACCL listener (bootstrap/hello_gate.h), as anyone who
// reaches the port sees it: per input, one to three strangers connect and
// send slices of the input (some then close, some stay), then a rank sends a
// hello sealed with the secret. The gate must hand on that rank's connection,
// and only it, soon: a stranger handed on, or the rank's hello lost, aborts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "base/wait.h"
#include "bootstrap/hello_gate.h"
#include "bootstrap/wire.h"

namespace {

const uint8_t kSecret[accl::kSecretBytes] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6,
                                             7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22};
const uint8_t kSession[accl::kSessionBytes] = {1, 1, 2, 3, 5, 8, 13, 21};
constexpr int32_t kSelf = 3;

sockaddr_in listenAt;
accl::HelloGate* gate;
int kept[64];  // strangers that stay connected for a while (the gate evicts or times them out)
uint64_t turn;

void fail(const char* why) {
  fprintf(stderr, "fuzz_gate: %s (errno %d: %s)\n", why, errno, strerror(errno));
  abort();
}

void setUp() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  listenAt.sin_family = AF_INET;
  listenAt.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  listenAt.sin_port = 0;
  socklen_t len = sizeof(listenAt);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&listenAt), sizeof(listenAt)) != 0 || listen(fd, 4096) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&listenAt), &len) != 0)
    fail("cannot listen");
  gate = new accl::HelloGate(fd, kSecret, "fuzzed gate", kSelf);
  gate->setSession(kSession);
  for (int& k : kept) k = -1;
}

// A client that closes with a reset (linger 0), from an address of its own
// in 127/8: a run makes millions of connections, and those the gate closes
// first stay in TIME_WAIT, more than one address's ephemeral ports.
int dial() {
  static uint32_t client;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const linger reset = {1, 0};
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl(0x7f000002u + client++ % 0xfffffdu);  // 127.0.0.2 .. 127.255.255.254
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)) != 0 ||
      bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof(from)) != 0)
    fail("cannot make a client socket (the harness, not the gate)");
  if (connect(fd, reinterpret_cast<const sockaddr*>(&listenAt), sizeof(listenAt)) != 0) {
    // libFuzzer's timer (SIGALRM) may interrupt a connect that waits for the
    // listener's queue: it goes on by itself, so wait for it to finish.
    pollfd p = {fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    if (errno != EINTR || poll(&p, 1, 20000) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
        err != 0)
      fail("cannot connect to the gate's listener (the harness, not the gate)");
  }
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!gate) setUp();
  if (size < 1) return 0;
  const int strangers = 1 + data[0] % 3;
  const bool stay = data[0] & 4;
  ++data, --size;
  for (int s = 0; s < strangers; ++s) {
    const size_t from = size * s / strangers, to = size * (s + 1) / strangers;
    const int fd = dial();
    if (to > from) (void)send(fd, data + from, to - from, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (stay) {
      int& slot = kept[turn++ % 64];
      if (slot >= 0) close(slot);
      slot = fd;
    } else {
      close(fd);
    }
  }
  accl::Hello h;
  memset(&h, 0, sizeof(h));
  h.magic = accl::kHelloMagic;
  h.purpose = accl::Purpose::Data;
  h.rank = 1;
  h.nranks = 4;
  h.to = kSelf;
  memcpy(h.session, kSession, sizeof(kSession));
  const uint64_t nonce = ++turn;
  memcpy(h.nonce, &nonce, sizeof(nonce));
  if (accl::sealHello(h, kSecret) != ncclSuccess) fail("cannot seal a hello");
  const int good = dial();
  if (send(good, &h, sizeof(h), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(h))) fail("cannot send the hello");
  accl::Deadline dl(nullptr, 10);
  int fd = -1;
  accl::Hello got;
  if (gate->next(dl, &fd, &got) != ncclSuccess) fail("the gate lost a rank's sealed hello");
  if (memcmp(got.nonce, h.nonce, accl::kNonceBytes) != 0) fail("the gate let a stranger in");
  close(good);  // the client first, with its reset: no TIME_WAIT on either side
  close(fd);
  return 0;
}
