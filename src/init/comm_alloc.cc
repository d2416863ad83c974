#include "bootstrap/bootstrap.h"
#include "coll/dev_comm.h"
#include "coll/host_direct.h"
#include "init/lifecycle.h"
#include "transport/connections.h"

namespace accl {
namespace {

// What a failed communicator stops, layer by layer (core/comm.h: commSetError).
void stopLayers(ncclComm* comm) {
  abortConnections(comm);
  devStopKernels(comm);
  hostDirectStop(comm);
}

}  // namespace

ncclComm* commAlloc() {
  auto* comm = new ncclComm();
  comm->bootstrap.reset(new Bootstrap());
  comm->stopLayers = stopLayers;
  return comm;
}

}  // namespace accl
