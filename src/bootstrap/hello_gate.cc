#include "bootstrap/hello_gate.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/check.h"
#include "base/wait.h"

namespace accl {

HelloGate::~HelloGate() {
  for (const Pending& p : pending_) close(p.fd);
}

void HelloGate::drop(size_t i, const char* why) {
  INFO(kBootstrap, "%s: dropped a connection that %s", who_, why);
  close(pending_[i].fd);
  pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
}

bool HelloGate::readHello(size_t i) {
  Pending& p = pending_[i];
  if (p.got == sizeof(Hello)) return true;  // read in full before (evictOldest): the bytes after it are not ours
  for (;;) {
    ssize_t n = recv(p.fd, reinterpret_cast<char*>(&p.hello) + p.got, sizeof(Hello) - p.got, MSG_DONTWAIT);
    if (n > 0) {
      p.got += static_cast<size_t>(n);
      if (p.got == sizeof(Hello)) return true;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n < 0 && errno == EINTR) continue;
    drop(i, "closed before its hello");
    return false;
  }
}

void HelloGate::admit(int fd) {
  // Connections whose hello has not come are strangers or about to speak (a
  // rank sends its hello as soon as it connects): past kMaxPending the
  // oldest goes, so a flood of silent connections costs neither this
  // process's descriptors nor a poll over thousands of them.
  if (pending_.size() >= kMaxPending)
    evictOldest("was the oldest of too many connections without a hello", std::chrono::milliseconds(0));
  Pending p{fd, 0, Hello{}, std::chrono::steady_clock::now(), {}};
  if (self_ == kToRoot) {
    // A fresh socket's buffer takes these few bytes at once.
    if (randomBytes(p.challenge, kSessionBytes) != ncclSuccess ||
        send(fd, p.challenge, kSessionBytes, MSG_DONTWAIT | MSG_NOSIGNAL) != kSessionBytes) {
      INFO(kBootstrap, "%s: dropped a connection it could not send a challenge to", who_);
      close(fd);
      return;
    }
  }
  pending_.push_back(p);
}

bool HelloGate::evictOldest(const char* why, std::chrono::milliseconds minAge) {
  const auto bornBy = std::chrono::steady_clock::now() - minAge;
  for (size_t i = 0; i < pending_.size() && pending_[i].since <= bornBy; ++i) {
    const size_t before = pending_.size();
    if (readHello(i)) continue;                  // in full: the next pass hands it on or refuses it
    if (pending_.size() < before) return true;   // it had closed, and went
    drop(i, why);
    return true;
  }
  return false;
}

const char* HelloGate::refusal(size_t i) {
  const Hello& h = pending_[i].hello;
  if (!helloValid(h, secret_)) return "sent a hello not sealed with the unique id's secret";
  const uint8_t* session = self_ == kToRoot ? pending_[i].challenge : session_;
  if (h.to != self_ || memcmp(h.session, session, kSessionBytes) != 0)
    return "sent a hello meant for another listener, communicator or connection (a replay)";
  std::array<uint8_t, kNonceBytes> nonce;
  memcpy(nonce.data(), h.nonce, kNonceBytes);
  if (!seen_.insert(nonce).second) return "replayed a hello already received";
  return nullptr;
}

ncclResult_t HelloGate::next(const Deadline& dl, int* fd, Hello* hello) {
  std::vector<pollfd> polled;
  for (;;) {
    if (dl.aborted()) return ncclInvalidUsage;  // the caller names the aborted operation
    if (dl.expired()) {
      WARN("%s: no connection with this communicator's secret came within %lld s (ACCL_TIMEOUT)", who_,
           static_cast<long long>(dl.seconds()));
      return ncclTimeout;
    }
    // What the pending connections sent, before any of them expires: a hello
    // may have come while nobody was asking (from the last, so that drops keep
    // the indices of those not yet looked at).
    for (size_t i = pending_.size(); i-- > 0;) {
      if (!readHello(i)) continue;
      if (const char* why = refusal(i)) {
        drop(i, why);
        continue;
      }
      *fd = pending_[i].fd;
      *hello = pending_[i].hello;
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      return ncclSuccess;
    }
    // Strangers silent for too long go; the soonest of them bounds the wait.
    const auto now = std::chrono::steady_clock::now();
    int waitMs = dl.pollMs();
    for (size_t i = pending_.size(); i-- > 0;) {
      const auto left = pending_[i].since + std::chrono::seconds(kHelloSeconds) - now;
      if (left <= std::chrono::steady_clock::duration::zero()) {
        drop(i, "sent no hello within 5 s");
        continue;
      }
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
      if (ms < waitMs) waitMs = static_cast<int>(ms);
    }
    polled.assign(1, pollfd{listenFd_, POLLIN, 0});
    for (const Pending& p : pending_) polled.push_back(pollfd{p.fd, POLLIN, 0});
    const int n = poll(polled.data(), polled.size(), waitMs);
    if (n < 0 && errno != EINTR) {
      WARN("%s: poll failed: %s", who_, strerror(errno));
      return ncclSystemError;
    }
    if (n > 0 && polled[0].revents) {  // a new connection; the pending ones are read at the top
      int s = -1, starved = 0;
      NCCLCHECK(socketTryAccept(listenFd_, &s, &starved));
      if (s >= 0) {
        admit(s);
      } else if (starved == EMFILE && evictOldest("was the oldest without a hello when this process ran out of "
                                                  "descriptors", std::chrono::milliseconds(100))) {
        // its descriptor is free for the next accept (pending for 100 ms at least: a rank speaks at once)
      } else if (starved) {  // the listener stays readable: wait for descriptors elsewhere to close
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
}

}  // namespace accl
