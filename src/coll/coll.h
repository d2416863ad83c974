// A collective call as the host executor sees it, after the API layer checked it.
#pragma once

#include <cstddef>

#include "nccl.h"

struct ncclComm;

namespace accl {

enum class CollKind { AllReduce };

struct CollArgs {
  CollKind kind;
  const char* opName;  // "ncclAllReduce", for messages
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  ncclComm* comm;
};

// Runs the collective to completion on the calling thread (host mode).
ncclResult_t runCollective(const CollArgs& args);
ncclResult_t ringAllReduce(const CollArgs& args);

}  // namespace accl
