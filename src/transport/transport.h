// The transports a connection can take, as a table. At set-up the receiver
// takes the first transport in kTransports that can connect it with the
// sender, makes its side and answers with the transport's code on the
// set-up socket; the sender makes its side of the transport the answer
// names (transport/connect.cc). One file each: ipc.cc, shm.cc, net.cc.
#pragma once

#include "base/wait.h"
#include "core/handles.h"
#include "nccl.h"

struct ncclComm;

namespace accl {

struct Transport {
  const char* name;  // "ipc", "shm", "net"
  char code;         // the receiver's answer that names it
  // The receiver asks: can this transport carry `peer`'s sends to this rank
  // on connection `tag`?
  bool (*canConnect)(const ncclComm* comm, int peer, int tag);
  // The receiver's side. It answers with `code` on the set-up socket `*fd`
  // once the sender can make its side; a transport that carries its data on
  // that socket takes it (and sets *fd to -1).
  ncclResult_t (*recvSide)(ncclComm* comm, int peer, int tag, int* fd, const Deadline& dl, ConnPtr* out);
  // The sender's side, after the answer: it acknowledges on *fd, or takes it.
  ncclResult_t (*sendSide)(ncclComm* comm, int peer, int tag, int* fd, const Deadline& dl, ConnPtr* out);
  // The receiver, once the sender acknowledged: drops what only the set-up
  // needed (a shared-memory name), so nothing is left behind if a process
  // dies later. Null where there is nothing; a connection's own tear-down
  // is its destructor.
  void (*setUpDone)(Connection* recv);
};

extern const Transport kIpcTransport;  // device connectors: CUDA IPC slots (tags >= kTagDevice, one host)
extern const Transport kShmTransport;  // a FIFO in POSIX shared memory (one host)
extern const Transport kNetTransport;  // the set-up socket itself, with a proxy thread

// In the order the receiver tries them.
constexpr const Transport* kTransports[] = {&kIpcTransport, &kShmTransport, &kNetTransport};

}  // namespace accl
