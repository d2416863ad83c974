// The communicator's handles on the state of the layers above core. Each
// layer defines its type, and the deleter where it has one, in its own files;
// core holds them without knowing what is inside, so that it includes
// nothing above it. A translation unit that makes or frees a communicator
// (init/) sees every type whole.
#pragma once

#include <memory>

namespace accl {

class Bootstrap;  // bootstrap/bootstrap.h
using BootstrapPtr = std::unique_ptr<Bootstrap>;

class Connection;  // transport/connection.h
using ConnPtr = std::unique_ptr<Connection>;

struct DevState;  // coll/dev_state.h: device mode
struct DevStateDeleter {
  void operator()(DevState* d) const;
};
using DevStatePtr = std::unique_ptr<DevState, DevStateDeleter>;

class Rma;  // coll/rma.h: windows and one-sided operations
struct RmaDeleter {
  void operator()(Rma* r) const;
};
using RmaPtr = std::unique_ptr<Rma, RmaDeleter>;

struct Topology;  // topo/topo.h: hosts, NICs, rails and planes (communicators on several hosts)
struct TopologyDeleter {
  void operator()(Topology* t) const;
};
using TopologyPtr = std::unique_ptr<Topology, TopologyDeleter>;

struct Hier;  // coll/hier.h: the hierarchical collectives' rings (from their first call)
struct HierDeleter {
  void operator()(Hier* h) const;
};
using HierPtr = std::unique_ptr<Hier, HierDeleter>;

class NetBackend;  // net/net.h: a communicator's network (ncclConfig_t.netName), not owned

class HostDirect;  // coll/host_direct.h: the direct collectives of host mode
struct HostDirectDeleter {
  void operator()(HostDirect* d) const;
};
using HostDirectPtr = std::unique_ptr<HostDirect, HostDirectDeleter>;

}  // namespace accl
