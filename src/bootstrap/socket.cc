#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/check.h"
#include "base/param.h"
#include "base/wait.h"

namespace accl {

FdGuard::~FdGuard() { if (fd_ >= 0) close(fd_); }
void FdGuard::reset(int fd) { if (fd_ >= 0) close(fd_); fd_ = fd; }

socklen_t addrLen(const SockAddr& a) {
  return a.sa.sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

std::string addrToString(const SockAddr& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a.sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &a.sin.sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(a.sin.sin_port));
  }
  if (a.sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &a.sin6.sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a.sin6.sin6_port));
  }
  return "<no address>";
}

bool parseAddr(const char* text, SockAddr* out) {
  if (!text) return false;
  std::string s(text), host, port;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') return false;
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos) return false;
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  if (host.empty() || port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return false;
  const long number = std::stol(port);
  if (number < 1 || number > 65535) return false;  // a port, not 0 (any) or a service name
  addrinfo hints = {}, *res = nullptr;
  hints.ai_flags = AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || !res) return false;
  memset(out, 0, sizeof(*out));
  memcpy(out, res->ai_addr, res->ai_addrlen <= sizeof(*out) ? res->ai_addrlen : sizeof(*out));
  freeaddrinfo(res);
  return true;
}

namespace {

ncclResult_t setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    WARN("fcntl(O_NONBLOCK) failed: %s", strerror(errno));
    return ncclSystemError;
  }
  return ncclSuccess;
}

void tuneSocket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Common poll step: waits for `events` on fd, honouring the deadline.
ncclResult_t pollOne(int fd, short events, const Deadline& dl, const char* what) {
  for (;;) {
    if (dl.aborted()) return ncclInvalidUsage;  // caller names the aborted operation
    if (dl.expired()) {
      WARN("%s: timed out after %lld s (ACCL_TIMEOUT)", what, static_cast<long long>(dl.seconds()));
      return ncclTimeout;
    }
    pollfd p = {fd, events, 0};
    int n = poll(&p, 1, dl.pollMs());
    if (n > 0) return ncclSuccess;
    if (n < 0 && errno != EINTR) {
      WARN("%s: poll failed: %s", what, strerror(errno));
      return ncclSystemError;
    }
  }
}

}  // namespace

ncclResult_t socketListen(const SockAddr& addr, int* fd, SockAddr* bound) {
  FdGuard s(socket(addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.get() < 0) {
    WARN("socket() failed: %s", strerror(errno));
    return ncclSystemError;
  }
  int one = 1;
  setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(s.get(), &addr.sa, addrLen(addr)) != 0) {
    WARN("bind to %s failed: %s", addrToString(addr).c_str(), strerror(errno));
    return ncclSystemError;
  }
  if (listen(s.get(), 16384) != 0) {
    WARN("listen on %s failed: %s", addrToString(addr).c_str(), strerror(errno));
    return ncclSystemError;
  }
  SockAddr b;
  memset(&b, 0, sizeof(b));  // every byte: hellos carry it under their MAC
  socklen_t len = sizeof(b);
  getsockname(s.get(), &b.sa, &len);
  NCCLCHECK(setNonBlocking(s.get()));
  if (bound) *bound = b;
  *fd = s.release();
  return ncclSuccess;
}

ncclResult_t socketConnect(const SockAddr& addr, const Deadline& dl, int* fd, bool* refused) {
  int64_t sleepMs = paramInt(Param::SocketRetrySleepMs);
  int64_t attemptsLeft = paramInt(Param::SocketRetryCnt);
  std::string where = addrToString(addr);
  for (;;) {
    FdGuard s(socket(addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (s.get() < 0) {
      WARN("socket() failed: %s", strerror(errno));
      return ncclSystemError;
    }
    NCCLCHECK(setNonBlocking(s.get()));
    int rc = connect(s.get(), &addr.sa, addrLen(addr));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      ncclResult_t r = pollOne(s.get(), POLLOUT, dl, ("connect to " + where).c_str());
      if (r != ncclSuccess) return r;
      socklen_t len = sizeof(err);
      getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) {
      tuneSocket(s.get());
      *fd = s.release();
      return ncclSuccess;
    }
    if (err == ECONNREFUSED && refused) {  // the caller knows the peer listened: it is gone, and says so
      *refused = true;
      return ncclRemoteError;
    }
    bool retriable = err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH ||
                     err == ENETUNREACH || err == ECONNRESET || err == EAGAIN;
    if (!retriable || --attemptsLeft <= 0) {
      WARN("connect to %s failed: %s%s", where.c_str(), strerror(err),
           retriable ? " (retries exhausted: NCCL_SOCKET_RETRY_CNT)" : "");
      return ncclRemoteError;
    }
    // Back off (doubling, at most 1 s), still honouring abort and the deadline.
    for (int64_t waited = 0; waited < sleepMs; waited += 10) {
      if (dl.aborted()) return ncclInvalidUsage;
      if (dl.expired()) {
        WARN("connect to %s: timed out (ACCL_TIMEOUT)", where.c_str());
        return ncclTimeout;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    sleepMs = sleepMs * 2 > 1000 ? 1000 : sleepMs * 2;
  }
}

ncclResult_t socketTryAccept(int listenFd, int* fd, int* starved) {
  *fd = -1;
  if (starved) *starved = 0;
  int s = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
  if (s >= 0) {
    tuneSocket(s);
    if (setNonBlocking(s) != ncclSuccess) { close(s); return ncclSystemError; }
    *fd = s;
    return ncclSuccess;
  }
  switch (errno) {
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM: {
      const int err = errno;
      static std::atomic<bool> told{false};
      if (!told.exchange(true))
        INFO(kBootstrap, "accept: %s (a connection waits until descriptors free up)", strerror(err));
      if (starved) *starved = err;
      return ncclSuccess;
    }
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
    case EINTR:
    case ECONNABORTED:
    // accept(2): errors of the network that the new connection already
    // ran into, to be treated as EAGAIN.
    case ENETDOWN:
    case EPROTO:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
      return ncclSuccess;
    default:
      WARN("accept failed: %s", strerror(errno));
      return ncclSystemError;
  }
}

ncclResult_t socketAccept(int listenFd, const Deadline& dl, int* fd) {
  for (;;) {
    NCCLCHECK(pollOne(listenFd, POLLIN, dl, "accept"));
    int starved = 0;
    NCCLCHECK(socketTryAccept(listenFd, fd, &starved));
    if (*fd >= 0) return ncclSuccess;
    if (starved) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the listener stays readable
  }
}

namespace {

// One non-blocking transfer step; returns bytes moved (>0), 0 if it would block, <0 on error.
ncclResult_t ioStep(int fd, bool send, char* p, size_t left, size_t* moved) {
  ssize_t n = send ? ::send(fd, p, left, MSG_NOSIGNAL | MSG_DONTWAIT) : ::recv(fd, p, left, MSG_DONTWAIT);
  if (n > 0) { *moved = static_cast<size_t>(n); return ncclSuccess; }
  *moved = 0;
  if (n == 0 && !send) return ncclRemoteError;  // orderly shutdown by the peer
  if (n < 0 && socketWouldBlock()) return ncclSuccess;
  if (n < 0 && (errno == ECONNRESET || errno == EPIPE)) return ncclRemoteError;
  WARN("socket %s failed: %s", send ? "send" : "recv", strerror(errno));
  return ncclSystemError;
}

}  // namespace

ncclResult_t socketSendRecv(int sendFd, const void* sbuf, size_t slen, int recvFd, void* rbuf,
                            size_t rlen, const Deadline& dl) {
  const char* sp = static_cast<const char*>(sbuf);
  char* rp = static_cast<char*>(rbuf);
  size_t sdone = 0, rdone = 0;
  while (sdone < slen || rdone < rlen) {
    bool progressed = false;
    if (sdone < slen) {
      size_t n;
      NCCLCHECK(ioStep(sendFd, true, const_cast<char*>(sp) + sdone, slen - sdone, &n));
      sdone += n;
      progressed |= n > 0;
    }
    if (rdone < rlen) {
      size_t n;
      NCCLCHECK(ioStep(recvFd, false, rp + rdone, rlen - rdone, &n));
      rdone += n;
      progressed |= n > 0;
    }
    if (progressed) continue;
    if (dl.aborted()) return ncclInvalidUsage;
    if (dl.expired()) {
      WARN("socket transfer timed out after %lld s (ACCL_TIMEOUT)", static_cast<long long>(dl.seconds()));
      return ncclTimeout;
    }
    pollfd p[2];
    int np = 0;
    if (sdone < slen) p[np++] = {sendFd, POLLOUT, 0};
    if (rdone < rlen) p[np++] = {recvFd, POLLIN, 0};
    if (poll(p, np, dl.pollMs()) < 0 && errno != EINTR) {
      WARN("poll failed: %s", strerror(errno));
      return ncclSystemError;
    }
  }
  return ncclSuccess;
}

ncclResult_t socketSend(int fd, const void* buf, size_t len, const Deadline& dl) {
  return socketSendRecv(fd, buf, len, -1, nullptr, 0, dl);
}

ncclResult_t socketRecv(int fd, void* buf, size_t len, const Deadline& dl) {
  return socketSendRecv(-1, nullptr, 0, fd, buf, len, dl);
}

}  // namespace accl
