// The system model across hosts: the NICs each host has, the rail and plane
// of each, and from that the ring's order and the NICs that each network
// connection uses, so that every hop between hosts joins two NICs of one
// rail. Each rank reports its host's NICs (topoReport); an allgather at init
// gives every rank every report, and each builds the same Topology from them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

namespace accl {

class NetBackend;

constexpr int kTopoMaxNics = 16;  // ports a host reports (8 NICs x 2 planes)

// One port of a host as a rank reports it: fixed size, it travels in the allgather.
struct TopoNic {
  char name[24];        // the interface, or the plugin's device
  char subnet[48];      // "10.64.3.0/24" for an interface; "" where unknown
  int32_t dev;          // the backend's device number on that host
  int32_t rail, plane;  // from ACCL_NICS or the plugin (-1: not said)
  int32_t speedMbps;
  int32_t nic, port;    // sysfs: its physical NIC on the host, and which of its two ports (-1: not two)
  char pci[16];         // its PCI address ("0000:17:00.1"; "" where it has none): sysfs or NCCL_TOPO_FILE
};
struct TopoReport {
  int32_t nics;
  int32_t nearNic = -1;  // the NIC nearest this rank's GPU on the PCI tree (-1: no GPU, or none nearer than the others)
  TopoNic nic[kTopoMaxNics];
};

// This rank's report: the backend's physical devices (the first
// kTopoMaxNics), with the rails and planes NCCL_TOPO_FILE and ACCL_NICS
// declare, the ports of each NIC (sysfs), and the NIC nearest `gpuPci`
// (this rank's GPU's PCI address; "" in host mode). A bad ACCL_NICS or
// NCCL_TOPO_FILE is an error with a WARN.
ncclResult_t topoReport(NetBackend* net, TopoReport* out, const char* gpuPci = "");
// ACCL_NICS's grammar, "<name>:<rail>[:<plane>],...": applied to `r`'s NICs
// (rails 0-63, planes 0-1); false with what is wrong in *err.
bool topoApplyNics(const char* spec, TopoReport* r, std::string* err);

struct TopoHost {
  std::vector<int> ranks;     // in rank order
  std::vector<TopoNic> nics;  // its lowest rank's report, in device order, rails and planes filled in
};

// NCCL_CROSS_NIC: whatever its value, a connection joins NICs of one rail
// where its two hosts share one; where they share none it pairs them by
// position, as NCCL too may cross rails in corner cases: 0 (one rail
// asked for) says so in a WARN, 1 and 2 (the default) at INFO.
struct Topology {
  std::vector<TopoHost> hosts;  // in the order of their lowest rank
  std::vector<int> hostOf;      // by rank
  std::vector<int> localOf;     // by rank: its place among its host's ranks
  std::vector<int> nearRail;    // by rank: the rail of the NIC nearest its GPU (-1: not known)
  int rails = 0, planes = 0;
  const char* source = "";      // how the rails were known (for the log)
  std::vector<int> ring;        // the ring's order: host by host, each host's ranks in rank order
  int crossNic = 2;
  bool nicsAgree = true;        // false: ranks of a host reported different NICs (topoHopDevices has none)
  std::string uneven;           // hosts that lack rails others have ("": every host has every rail)
};

// From every rank's host (hostKey, by rank) and report. Ranks of one host
// that report different NICs, or rails that leave two ports of one host on
// one rail and plane, fall back with a WARN to what can be trusted (the
// lowest rank's NICs; rails in device order). Every rank decides alike.
Topology topoBuild(const std::vector<uint64_t>& hostKey, const std::vector<TopoReport>& reports, int crossNic);

// The devices (on `self`'s host, self being `sender` or `receiver`) of the
// network connection from `sender` to `receiver`, in the order lane j pairs
// them: the j-th on each side are on one rail and plane. `wholeHost`: the
// connection is the only one between the two hosts in its direction (a
// ring's hop), so it takes every rail they share; otherwise it takes the
// sender's rail (that of the NIC nearest its GPU where known and shared,
// else its place on its host modulo the shared rails), on both planes. At most `most` devices. Where the hosts share no rail, the i-th
// NICs of each side, with *why saying so. Empty where !t.nicsAgree.
// `active` (where not null): a connection that takes the sender's rail also
// gets the next shared rail's ports (both planes), after its own, to stand
// by (failover: they carry while its own rail is down); *active says how
// many of the devices are its own.
std::vector<int> topoHopDevices(const Topology& t, int sender, int receiver, int self, bool wholeHost, int most,
                                std::string* why, int* active = nullptr);

// Lines that describe the topology: hosts, their NICs' rails and planes, the ring.
std::vector<std::string> topoDescribe(const Topology& t);

}  // namespace accl
