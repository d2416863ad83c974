#include "core/ops.h"

namespace accl {

bool isP2p(CollKind k) { return k == CollKind::Send || k == CollKind::Recv; }

const char* collName(CollKind k) {
  switch (k) {
    case CollKind::AllReduce: return "AllReduce";
    case CollKind::Broadcast: return "Broadcast";
    case CollKind::Reduce: return "Reduce";
    case CollKind::AllGather: return "AllGather";
    case CollKind::ReduceScatter: return "ReduceScatter";
    case CollKind::Send: return "Send";
    case CollKind::Recv: return "Recv";
    case CollKind::AllToAll: return "AllToAll";
    case CollKind::Gather: return "Gather";
    case CollKind::Scatter: return "Scatter";
  }
  return "?";
}

bool runsAsSendRecv(CollKind k) { return k == CollKind::AllToAll || k == CollKind::Gather || k == CollKind::Scatter; }

}  // namespace accl
