// The door of a listening socket: accepts connections and reads each one's
// Hello, many at a time, and hands on only those sealed with the secret (a
// MAC that verifies), each once: a hello replayed from the wire is dropped.
// A root's gate first sends each connection a random challenge, which the
// hello must carry (sendRootHello), so no recorded hello passes at a root. A
// stranger that connects and stays silent is dropped after kHelloSeconds
// without holding up the connections queued behind it (a port scanner, or a
// health check, must not delay an init), and a flood of them, or a process
// out of descriptors, neither fails the init nor costs more than
// kMaxPending descriptors.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <set>
#include <vector>

#include "base/wait.h"
#include "bootstrap/wire.h"
#include "nccl.h"

namespace accl {

class HelloGate {
 public:
  static constexpr int kHelloSeconds = 5;
  // Connections without a hello yet that it holds; past it the oldest goes.
  static constexpr size_t kMaxPending = 256;

  // `self`: the rank whose listener it is, or kToRoot; hellos must be for it.
  HelloGate(int listenFd, const uint8_t* secret, const char* who, int32_t self = kToRoot)
      : listenFd_(listenFd), secret_(secret), who_(who), self_(self) {}
  // The communicator's session, which hellos to a rank must carry (those to
  // the root carry its challenge instead); known once the rendezvous is over.
  void setSession(const uint8_t session[kSessionBytes]) { memcpy(session_, session, kSessionBytes); }
  ~HelloGate();
  HelloGate(const HelloGate&) = delete;
  HelloGate& operator=(const HelloGate&) = delete;

  // The next connection whose Hello is sealed with the secret: its fd (the caller's
  // now) and Hello. Fails when `dl` expires or its abort flag rises.
  ncclResult_t next(const Deadline& dl, int* fd, Hello* hello);

 private:
  struct Pending {
    int fd;
    size_t got;  // bytes of `hello` read so far
    Hello hello;
    std::chrono::steady_clock::time_point since;
    uint8_t challenge[kSessionBytes];  // a root's: the session its hello must carry
  };
  // A new connection: pending, after a root's challenge has gone to it.
  void admit(int fd);
  void drop(size_t i, const char* why);
  // Makes room: drops the oldest pending connection, pending for minAge at
  // least, whose hello has not come in full (read first: one that has is
  // handed on or refused at the next pass). False where there is none.
  bool evictOldest(const char* why, std::chrono::milliseconds minAge);
  // Reads what pending[i] has sent; true when its Hello is complete.
  bool readHello(size_t i);
  // Why pending[i]'s complete hello is refused, or nullptr: it is taken (its
  // nonce is then remembered).
  const char* refusal(size_t i);

  int listenFd_;
  const uint8_t* secret_;
  const char* who_;  // for INFO lines: "bootstrap root", "rank 3"
  int32_t self_;
  uint8_t session_[kSessionBytes] = {};  // a rank's gate: the communicator's
  std::vector<Pending> pending_;
  std::set<std::array<uint8_t, kNonceBytes>> seen_;  // the nonces of the hellos handed on
};

}  // namespace accl
