// One connection of ACCL's TCP backend once it is made: one ordered stream
// of messages over several TCP sockets ("lanes"), which may leave from
// several NICs. A message goes in frames (its number, tag, total size,
// offset, length) that any lane may carry. Each frame goes to a lane with
// room for all of it, the one whose room is least used: a lane takes work as
// fast as it moves it, so a slow socket or port carries less and the others
// more, instead of every lane an equal share at the slowest one's rate. A
// lane's room and frames follow the rate it was seen to move (about 1 ms of
// it): small on a slow port, so that its backlog stays short; large on a
// fast link, so that a frame is worth its system call and wake-up. The
// receiver reads each frame straight into its message's place (frames of
// messages not posted yet wait in a buffer of the stream's); messages
// complete in the order they were posted. With one lane a message is one
// frame.
//
// Who moves the lanes: with one thread (the default) the caller, in post
// and test, so a small message leaves in the call that posts it with no
// hand-over between threads; with helper threads (NCCL_SOCKET_NTHREADS > 1)
// each moves its share of the lanes by itself, and test only looks.
//
// Failover (a stream over several NICs, ACCL_LANE_TIMEOUT_MS > 0, no helper
// threads): the sender keeps a copy of each frame until the peer's kernel
// acknowledged it. A lane with bytes unacknowledged, none acknowledged for
// ACCL_LANE_TIMEOUT_MS, and TCP retransmitting or its own interface down (a
// port or link gone) is given up (never the last): a cut notice ("lane k ends at byte A", A the bytes acknowledged) and
// every frame past A, or its unacknowledged tail, go over one lane that
// moves. The receiver reads lane k up to A (acknowledged bytes are in its
// kernel, link or no link) and no further; bytes it read past A before the
// notice came are uncounted, to be counted again as they come a second time
// (a message already complete takes nothing twice). A lane given up that
// works again (the peer acknowledged all it was given, its interface up,
// ACCL_LANE_TIMEOUT_MS after it went) is taken back: a rejoin notice ("lane
// k goes on at byte W", W all it was given), after every earlier notice,
// goes over a lane that moves; the receiver, once it read lane k up to its
// cut, skips its bytes up to W, reads frames from there and says so with
// one byte back on lane k; the sender writes new frames on it once that
// byte came (never before: the receiver must know where the lane's old
// bytes end, and must have passed its cut before the lane can be cut
// again). Notices name the lane's generation (how often it came back), so
// that one sent again late is told from a new one. Standby lanes (a rail
// beside the connection's own) carry only while every other lane is given up.
#pragma once

#include <poll.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "nccl.h"

namespace accl {

class SocketStream {
 public:
  // Takes the sockets (non-blocking, connected, authenticated); `failover`:
  // they leave from several NICs (the sender keeps copies; see above);
  // `standby` (by lane, send): lanes that carry only while every other one
  // is given up (a rail beside the connection's own).
  SocketStream(std::vector<int> fds, bool send, bool failover = false, const std::vector<bool>& standby = {});
  ~SocketStream();
  SocketStream(const SocketStream&) = delete;
  SocketStream& operator=(const SocketStream&) = delete;

  // Hands the lanes to `threads` helper threads (each its share, in turn);
  // with 1 or fewer the caller moves them. Once, before the first post.
  ncclResult_t startHelpers(int threads);
  // A request (*request null where max requests are in flight: call again).
  ncclResult_t post(char* data, size_t size, uint32_t tag, void** request);
  // Moves the lanes (where no helpers do) as far as they go now; *done once
  // the request and all before it are complete (it is then freed), with its
  // bytes in *size. An error: a lane broke, or the peer sent what no request
  // can take, or (receiving) every lane ended before the request could.
  static ncclResult_t test(void* request, int* done, size_t* size);
  // A sender with no request outstanding: where it fails over, moves its
  // lanes (a stalled one is given up, frames held go again). ncclInProgress
  // while it holds frames its peer has not acknowledged; an error: no lane
  // is left.
  ncclResult_t progress();
  // The descriptors to poll until the stream can move (at most `max`).
  int pollFds(pollfd* fds, int max) const;
  int lanes() const { return static_cast<int>(lanes_.size()); }
  bool helped() const { return !helpers_.empty(); }
  size_t stagedBytes();  // recv: frames held for messages not posted yet
  int deadLanes() const { return static_cast<int>(deadLanes_); }
  int rejoins() const { return static_cast<int>(rejoins_); }  // lanes taken back so far
  uint64_t laneBytes(size_t lane) const { return lanes_[lane].bytes; }

  // Tests: gives up lane `lane` of a sender as if its peer had acknowledged
  // `share` (0 to 1) of the bytes it still holds. False: it cannot (no
  // failover, or gone already), or no lane is left.
  bool failLaneForTest(size_t lane, double share);
  // Tests: frames stay held whatever the peer acknowledged (so that a cut
  // can fall behind what the receiver read, as where acknowledgements were lost).
  void holdForTest() { holdForTest_ = true; }
  // Tests: a lane given up is taken back this long after (once it works).
  void rejoinAfterForTest(uint64_t us) { rejoinUs_ = us; }

  // Bytes of a message one frame carries where there are several lanes: at
  // least this (a lane's first frames, and a slow lane's), at most kMaxFrameBytes.
  static constexpr size_t kMinFrameBytes = 16 << 10;
  static constexpr size_t kMaxFrameBytes = 1 << 20;
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
  // A notice is a frame of no payload whose offset no message's chunk can
  // have: a cut (lane L ends at byte (tag << 32) | seq) or a rejoin (lane L
  // goes on at that byte), L the low 16 bits of `total`, the lane's
  // generation (rejoins so far; a rejoin names the one it begins) the high 16.
  static constexpr uint32_t kCutOffset = 0xffffffffu;
  static constexpr uint32_t kRejoinOffset = 0xfffffffeu;
  static bool isNotice(const Frame& h) { return h.offset >= kRejoinOffset && h.len == 0; }
  static Frame notice(uint32_t kind, size_t lane, uint32_t gen, uint64_t at) {
    return {static_cast<uint32_t>(at), static_cast<uint32_t>(at >> 32), static_cast<uint32_t>(lane) | (gen << 16), kind,
            0};
  }
  // A frame a sender holds (failover): written or to be written, its payload
  // in memory of its own; `at`: where on its lane its head starts.
  struct Held {
    Frame head;
    std::unique_ptr<char[]> keep;
    const char* payload = nullptr;
    uint64_t at = 0;
  };
  // A frame a receiver read the head of (several lanes): where, on its lane.
  struct Seen {
    uint64_t at;
    Frame head;
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
  // A lane's own fields are its mover's (the caller, or its helper); what
  // they point at is the stream's, under mu_.
  struct Lane {
    int fd;
    Frame head{};
    size_t moved = 0;           // of the frame: head, then payload
    Request* req = nullptr;     // whose frame it carries (recv: once the head names it; send: null for a held one)
    bool writing = false;       // send: a frame begun (its payload at src)
    const char* src = nullptr;
    bool dead = false;          // send: given up (failover); recv: cut (what it carries past the cut is dropped)
    bool standby = false;       // send: carries only while every lane that is not is given up
    uint32_t gen = 0;           // rejoins of it so far (its notices carry it)
    bool rejoining = false;     // send, dead: its rejoin notice sent, the peer's byte not yet back
    bool gone = false;          // send, dead: its socket failed outright (never taken back)
    uint64_t deadUs = 0;        // send: when it was given up
    int rtoMaxMs = 0;           // send, failover: TCP_RTO_MAX_MS as the kernel set it (0: no such option)
    bool stallWarned = false;   // send: the last lane, stalled, said so
    std::deque<Held> held;      // send, failover: frames begun that the peer may not have, oldest first
    std::deque<Held> loose;     // send: frames of no request to write before any new one (a cut and what follows)
    uint64_t ackedAt = 0;       // send, failover: bytes acknowledged at the last look,
    uint64_t stillUs = 0;       // and since when no more
    uint64_t wire = 0;          // recv: bytes read, heads too
    uint64_t cutAt = UINT64_MAX;  // recv: its sender gave it up here (read up to it, no further)
    uint64_t resumeAt = UINT64_MAX;  // recv: cut, and taken back here (what lies between is skipped)
    uint64_t skipTo = UINT64_MAX;    // recv: taken back: bytes up to here are dropped
    bool untried = false;            // recv: taken back, no byte past its rejoin point read yet
    bool discarding = false;    // recv: its frame is of a message complete already (sent again): read, dropped
    std::deque<Seen> seen;      // recv, several lanes: its recent frames (where a cut may fall)
    bool staging = false;       // recv: its frame goes into `stage` (its message not posted yet)
    std::list<Staged>::iterator stage;
    bool blocked = false;       // send: no room; recv: its next frame waits for a post (until posts_ moves)
    uint32_t blockedAt = 0;     // recv: posts_ when it blocked
    bool eof = false;           // recv: the peer closed it (between frames)
    size_t queued = 0;          // send: bytes not yet acknowledged, as last seen
    uint64_t bytes = 0;         // payload and heads it moved (for the log)
    // send, several lanes: the bytes it may have unacknowledged, its frames'
    // payload, and how fast it was seen to move (bytes a microsecond, and
    // the last look at it: when, bytes acknowledged by then, and whether it
    // had bytes in flight then: only a window that starts busy is a sample).
    size_t room = 0;
    size_t frame = kMinFrameBytes;
    double rate = 0;
    size_t most = SIZE_MAX;  // the largest buffer the kernel gives (less than asked for)
    uint64_t seenUs = 0, seenAcked = 0;
    bool seenBusy = false;
  };
  // A helper thread and the lanes it moves: [begin, end).
  struct Helper {
    std::thread thread;
    int wakeFd = -1;  // an eventfd: a post, or the stop
    size_t begin = 0, end = 0;
    size_t turn = 0;  // send: the lane that wins a tie (in turn)
  };

  ncclResult_t test(Request* r, int* done, size_t* size);
  bool moveSend(size_t begin, size_t end, size_t* turn);
  void beginFrame(Lane& l, Request* r);
  void beginHeld(Lane& l);
  bool checkLanes(uint64_t nowUs);
  bool failLane(size_t lane, uint64_t acked, const char* why);
  void watchDeadLane(size_t lane, uint64_t nowUs);
  Lane* sendNotices(const Frame& last, std::deque<Held>* after);
  bool primaryLive() const;
  bool cutLane(Lane& l);
  bool readNotice(const Frame& h);
  bool readRejoin(Lane& k, uint32_t gen, uint64_t at);
  bool skip(Lane& l);
  void resume(Lane& l, uint64_t at);
  bool endUntried(Lane& l);
  bool dropCut(Lane& l);
  size_t readable(const Lane& l, size_t want) const;
  bool moveRecv(size_t begin, size_t end);
  bool writeFrame(Lane& l);
  bool readLane(Lane& l);
  bool recvBlocked(const Lane& l) const { return l.blocked && l.blockedAt == posts_.load(); }
  int lanePollFds(size_t begin, size_t end, pollfd* fds, int max) const;
  void finished(Request* r, size_t len);  // a frame of r done: under no lock
  void helperLoop(Helper* h);
  void signalDone();
  Request* unframed(size_t chunk, size_t* len) const;
  void sizeLane(Lane& l, size_t want);
  void watchLane(Lane& l, uint64_t nowUs);
  Request* posted(uint32_t seq);
  bool fits(const Frame& h, const Request* r) const;
  bool claim(std::list<Staged>::iterator s, Request* r);

  bool send_;
  bool failover_;                 // send: copies kept, stalled lanes given up
  uint64_t laneTimeoutUs_ = 0;    // ACCL_LANE_TIMEOUT_MS
  uint64_t rejoinUs_ = 0;         // a lane given up is taken back this long after, at the earliest
  uint64_t checkedUs_ = 0;        // send, failover: the last look at the lanes
  size_t deadLanes_ = 0;
  size_t rejoins_ = 0;
  bool holdForTest_ = false;
  std::vector<Frame> noticesSent_;  // send: every notice sent (each new one goes after them all again)
  std::unique_ptr<char[]> sink_;  // recv: where dropped payload goes
  std::vector<Lane> lanes_;
  std::vector<std::unique_ptr<Helper>> helpers_;
  int doneFd_ = -1;                // helpers: an eventfd a request's completion (or a failure) writes
  std::atomic<bool> stop_{false};  // helpers: the stream closes
  std::atomic<uint32_t> posts_{0};  // recv: posts so far (a blocked lane looks again when it moves)
  size_t turn_ = 0;               // send, no helpers: the lane that wins a tie (in turn)

  std::mutex mu_;  // what follows (the caller's, and every helper's)
  bool broken_ = false;
  size_t eofLanes_ = 0;         // recv: lanes the peer closed or cut; all of them: nothing more comes
  bool cuts_ = false;           // recv: a lane was cut (frames may come twice)
  std::deque<Request*> queue_;  // posted, oldest first
  uint32_t nextSeq_ = 0;        // the next posted message's number
  std::list<Staged> staged_;    // recv: frames ahead of the posts, oldest first
  size_t stagedBytes_ = 0;
  size_t maxStaged_ = 0;        // recv: the most it held (for the log)
};

}  // namespace accl
