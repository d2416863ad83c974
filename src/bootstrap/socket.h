// TCP sockets with deadlines: every blocking step polls in short slices and
// checks the Deadline (abort flag + timeout), so no socket call hangs forever.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <string>

#include "base/wait.h"
#include "nccl.h"

namespace accl {

// An IPv4 or IPv6 address with port, fixed size so it can travel in messages.
union SockAddr {
  sockaddr sa;
  sockaddr_in sin;
  sockaddr_in6 sin6;
};
static_assert(sizeof(SockAddr) == 28, "SockAddr travels on the wire");

std::string addrToString(const SockAddr& a);  // "1.2.3.4:5" or "[::1]:5"
// Parses "host:port", "[v6]:port" or "v6addr:port" (numeric hosts, or names via
// getaddrinfo); the port is a number in [1, 65535].
bool parseAddr(const char* text, SockAddr* out);
socklen_t addrLen(const SockAddr& a);

// Closes on scope exit unless released.
class FdGuard {
 public:
  explicit FdGuard(int fd = -1) : fd_(fd) {}
  ~FdGuard();
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  int get() const { return fd_; }
  int release() { int f = fd_; fd_ = -1; return f; }
  void reset(int fd);

 private:
  int fd_;
};

// Listens on `addr` (port 0: any free port); `bound` receives the actual address.
ncclResult_t socketListen(const SockAddr& addr, int* fd, SockAddr* bound);
// Connects with retries and back-off on refused/unreachable (the peer may not
// listen yet). With `refused`, a refusal is final instead: *refused is set and
// the result is ncclRemoteError (for a peer known to have listened already).
ncclResult_t socketConnect(const SockAddr& addr, const Deadline& dl, int* fd, bool* refused = nullptr);
ncclResult_t socketAccept(int listenFd, const Deadline& dl, int* fd);
// Whether a failed non-blocking socket call (errno) only means "not now".
inline bool socketWouldBlock() { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR; }

// A connection if one is waiting, else *fd = -1 (ncclSuccess either way).
// *starved (where given) is 0, or the errno that says one is waiting but
// the process (EMFILE) or the system (ENFILE, ENOBUFS, ENOMEM) ran out of
// descriptors or memory to take it: it stays in the backlog until some
// close, so the caller frees one of its own (EMFILE) or waits a little
// rather than fail.
ncclResult_t socketTryAccept(int listenFd, int* fd, int* starved = nullptr);
// All bytes or an error: ncclRemoteError when the peer closed, ncclTimeout, ncclSystemError.
ncclResult_t socketSend(int fd, const void* buf, size_t len, const Deadline& dl);
ncclResult_t socketRecv(int fd, void* buf, size_t len, const Deadline& dl);
// Sends to one socket while receiving from another (a ring step), so two ranks
// sending to each other can never deadlock on full kernel buffers.
ncclResult_t socketSendRecv(int sendFd, const void* sbuf, size_t slen, int recvFd, void* rbuf,
                            size_t rlen, const Deadline& dl);

}  // namespace accl
