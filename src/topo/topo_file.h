// NCCL_TOPO_FILE and NCCL_TOPO_DUMP_FILE, for what ACCL models of a host:
// its NICs, in NCCL's XML (<system> ... <pci busid> <nic> <net name ...>).
#pragma once

#include <string>

#include "topo/topo.h"

namespace accl {

// Applies what topology file `text` says of r's NICs: each <net> element
// that names one gives its PCI address (the <pci busid> it lies in), its
// speed (Mb/s) and, where given, its rail and plane (ACCL's own
// attributes; NCCL ignores them). <net>s that name no NIC of r are listed
// in *ignored. False with what is wrong in *err: no <system>, XML that
// does not parse, a rail or plane out of range.
bool topoApplyFile(const std::string& text, TopoReport* r, std::string* err, std::string* ignored);

// Host h's NICs as t decided them (rails, planes), as a topology file that
// NCCL_TOPO_FILE reads back.
std::string topoFileXml(const Topology& t, int host);

}  // namespace accl
