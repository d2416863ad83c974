// What sysfs says of a host's NICs: which interfaces are ports of one
// physical NIC (PCI functions of one device, or ports of one function),
// so that a dual-port NIC's two ports become one rail's two planes.
#pragma once

#include <string>

#include "topo/topo.h"

namespace accl {

// The PCI address ("0000:17:00.1") of interface `ifname` under sysfs root
// `sys` ("/sys"), and its dev_port; "" where it has no PCI device (a veth,
// a bridge, a bond, loopback).
std::string pciAddressOfNet(const std::string& sys, const char* ifname, int* devPort);

// Fills in each NIC's PCI address where NCCL_TOPO_FILE gave none (from
// sysfs under `sys`; "" reads none), and the
// nic and port of r's NICs whose rail no one declared: two
// interfaces on one PCI device (functions .0 and .1 of one bus:slot, or one
// function's dev_port 0 and 1) are ports 0 and 1 of one NIC; every other
// NIC is its own, with no port (-1). NICs are numbered as their first port
// comes in r's order.
void topoPciPorts(const std::string& sys, TopoReport* r);

// Of r's NICs with a PCI address, the one whose path in the PCI tree
// shares the most with GPU `gpuPci`'s (the first of equals: a NIC's two
// ports); -1 where there is no GPU, or every NIC is as near as any other
// (the tree says nothing).
int topoNearestNic(const std::string& sys, const char* gpuPci, const TopoReport& r);

}  // namespace accl
