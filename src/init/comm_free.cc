// commFree: a communicator's layers stop, its connections go, then it.
#include <unistd.h>

#include <chrono>
#include <vector>

#include "base/debug.h"
#include "bootstrap/bootstrap.h"
#include "coll/dev_comm.h"
#include "coll/host_direct.h"
#include "coll/rma.h"
#include "init/lifecycle.h"
#include "transport/connection.h"
#include "transport/connections.h"
#include "transport/peer_life.h"

namespace accl {

void commFree(ncclComm* comm) {
  unregisterComm(comm);
  if (comm->initThread.joinable()) comm->initThread.join();
  // Everything that could still wait on this comm checks abortFlag; give it time to leave.
  const auto leaveBy = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto inside = [comm] { return comm->inFlight.load() > 0 || commPinned(comm); };
  while (inside() && std::chrono::steady_clock::now() < leaveBy) usleep(100);
  if (inside()) {  // better a leak than freeing memory a call still uses
    devStopWatch(comm);
    peerLifeLeave(comm);
    WARN("%s (rank %d): calls are still inside the communicator 10 s after it was stopped: it is left "
         "allocated rather than freed under them", comm->name.c_str(), comm->rank);
    return;
  }
  devStop(comm);   // the proxy of staged device operations uses the connections
  rmaStop(comm);   // so does the receiver of one-sided operations
  {
    std::vector<ConnPtr> conns;
    if (!commTakeConnections(comm, &conns)) {
      peerLifeLeave(comm);
      return;
    }
  }  // destroyed here, outside connMu
  comm->dev.reset();  // after the device connectors, whose release waits for the kernels
  comm->hostDirect.reset();  // after the windows and the proxies, which may stop its slot (commSetError)
  for (Registration* r : comm->registrations) delete r;
  peerLifeRelease(comm);  // last: its watchers see it gone from here on
  comm->magic = kCommDeadMagic;
  delete comm;
}

}  // namespace accl
