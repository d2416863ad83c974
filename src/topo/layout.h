// A layout: what each host of a (real or imagined) job has, as text, so that
// the topology can be planned without the job (`python -m accl.topo`, tests).
// Lines (a '#' starts a comment):
//   host [NAME] ranks R,R,... nics NIC[=SUBNET][@PCI],... [rails ACCL_NICS]
//   crossnic 0|1|2
// The ranks of all hosts are 0..n-1, each once; `rails` takes ACCL_NICS's
// grammar (<name>:<rail>[:<plane>],...) for that host's NICs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topo/topo.h"

namespace accl {

struct TopoLayout {
  std::vector<uint64_t> hostKey;      // by rank: its host
  std::vector<TopoReport> reports;    // by rank: its host's NICs
  std::vector<std::string> hostName;  // by host, in the order given
  int crossNic = 2;
};

// False with what is wrong (and on which line) in *err.
bool topoParseLayout(const std::string& text, TopoLayout* out, std::string* err);

// This host's NICs as a layout's `nics` and `rails` words (from a report).
std::string topoLayoutNics(const TopoReport& r);

}  // namespace accl
