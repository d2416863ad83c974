// One connection of ACCL's TCP backend once it is made: one ordered stream
// of messages over several TCP sockets ("lanes"), which may leave from
// several NICs. A message goes in chunks, each a frame (its message's
// number, tag, total size, offset, length) that any lane may carry, and each
// chunk goes to whichever lane is free: a lane whose kernel queue of unsent
// bytes is short (TCP_NOTSENT_LOWAT). So a slow socket or port carries less
// and the others more, instead of every lane an equal share at the slowest
// one's rate. The receiver reads each frame straight into its message's
// place; a message is complete once its bytes are all there, and messages
// complete in the order they were posted. Nothing moves but in post and
// test, on the caller's thread: a small message leaves in the call that
// posts or tests it, with no hand-over.
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <vector>

#include "nccl.h"

namespace accl {

class SocketStream {
 public:
  // Takes the sockets (non-blocking, connected, authenticated).
  SocketStream(std::vector<int> fds, bool send);
  ~SocketStream();
  SocketStream(const SocketStream&) = delete;
  SocketStream& operator=(const SocketStream&) = delete;

  // A request (*request null where max requests are in flight: call again).
  ncclResult_t post(char* data, size_t size, uint32_t tag, void** request);
  // Moves every lane of the request's stream as far as it goes now; *done
  // once the request and all before it are complete (it is then freed), with
  // its bytes in *size. An error: a lane broke, or the peer sent what no
  // request can take.
  static ncclResult_t test(void* request, int* done, size_t* size);
  // The descriptors to poll until the stream can move (at most `max`).
  int pollFds(pollfd* fds, int max) const;
  int lanes() const { return static_cast<int>(lanes_.size()); }
  size_t stagedBytes() const { return stagedBytes_; }  // recv: frames held for messages not posted yet

  // Bytes of a message one frame carries at most (a smaller message: one frame).
  static constexpr size_t kChunkBytes = 16 << 10;
  // Bytes of frames a receiver holds for messages not posted yet.
  static constexpr size_t kStageBytes = 4 << 20;

 private:
  struct Frame {
    uint32_t seq;     // the message's number on this stream
    uint32_t tag;
    uint32_t total;   // the message's size
    uint32_t offset;  // of this chunk in the message
    uint32_t len;     // of this chunk
  };
  struct Request {
    SocketStream* stream;
    char* data;
    size_t size;    // send: the message; recv: the most it may take
    uint32_t tag;
    uint32_t seq;
    size_t total;   // send: size; recv: known from its first frame (SIZE_MAX until then)
    size_t handed;  // send: bytes given to lanes in frames
    bool framed;    // a frame of it made or seen (a message of 0 bytes has one)
    size_t moved;   // bytes whose frames are fully written or read
    size_t frames;  // frames of it on lanes, not yet done
    bool complete() const { return framed && frames == 0 && moved == total; }
  };
  // A frame that came before its message was posted.
  struct Staged {
    Frame head;
    std::unique_ptr<char[]> data;
    bool full = false;     // all its bytes are here
    bool counted = false;  // its message, posted, counts it among its frames
  };
  struct Lane {
    int fd;
    Frame head{};
    size_t moved = 0;           // of the frame: head, then payload
    Request* req = nullptr;     // whose frame it carries (recv: once the head names it)
    bool staging = false;       // recv: its frame goes into `stage` (its message not posted yet)
    std::list<Staged>::iterator stage;
    bool blocked = false;       // send: would block; recv: its next frame's message is not posted yet
    bool eof = false;           // recv: the peer closed it (between frames)
    size_t queued = 0;          // send: bytes not yet acknowledged, as last seen
    uint64_t bytes = 0;         // payload and heads it moved (for the log)
  };

  ncclResult_t test(Request* r, int* done, size_t* size);
  bool moveSend();
  bool moveRecv();
  bool writeFrame(Lane& l);
  bool readLane(Lane& l);
  Request* unframed(size_t* len) const;
  Request* posted(uint32_t seq);
  bool fits(const Frame& h, const Request* r) const;
  bool claim(std::list<Staged>::iterator s, Request* r);

  bool send_;
  bool broken_ = false;
  bool ended_ = false;          // recv: every lane closed (frames held ahead still go to their posts)
  std::vector<Lane> lanes_;
  std::deque<Request*> queue_;  // posted, oldest first
  uint32_t nextSeq_ = 0;        // the next posted message's number
  std::list<Staged> staged_;  // recv: frames ahead of the posts, oldest first
  size_t stagedBytes_ = 0;
  size_t maxStaged_ = 0;        // recv: the most it held (for the log)
  size_t turn_ = 0;             // send: the lane that wins a tie (in turn)
  size_t laneRoom_ = SIZE_MAX;  // send, several lanes: the bytes a lane may have unacknowledged
};

}  // namespace accl
