// The TCP backend's frames, as a peer that holds the secret (or a broken
// one) may write them: the bytes go into one end of a socket pair whose
// other end is a receiving stream with a few receives posted, then the end
// closes; the stream must take them, or fail the receive, within its bounds.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "net/socket_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;  // what one socket pair holds without a reader
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0) return 0;
  size_t sent = 0;
  while (sent < size) {
    const ssize_t k = write(fds[1], data + sent, size - sent);
    if (k <= 0) break;
    sent += static_cast<size_t>(k);
  }
  close(fds[1]);
  {
    accl::SocketStream stream({fds[0]}, false);
    // Receives of a few sizes and tags, as the transport posts them.
    static char bufs[3][4096];
    const size_t sizes[3] = {64, 4096, 1};
    const uint32_t tags[3] = {0, 0, 4};
    void* reqs[3] = {};
    for (int i = 0; i < 3; ++i)
      if (stream.post(bufs[i], sizes[i], tags[i], &reqs[i]) != ncclSuccess) break;
    for (int i = 0; i < 3 && reqs[i]; ++i) {
      int done = 0;
      size_t got = 0;
      ncclResult_t r = ncclSuccess;
      for (int turn = 0; turn < 64 && r == ncclSuccess && !done; ++turn) r = accl::SocketStream::test(reqs[i], &done, &got);
      if (r != ncclSuccess || !done) break;  // a refused frame, or the end: the rest are the stream's to free
    }
  }
  return 0;
}
