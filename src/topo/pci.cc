// Ports of one NIC, from sysfs (topo/pci.h).
#include "topo/pci.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

namespace accl {

std::string pciAddressOfNet(const std::string& sys, const char* ifname, int* devPort) {
  *devPort = 0;
  const std::string dir = sys + "/class/net/" + ifname;
  char real[PATH_MAX];
  if (!realpath((dir + "/device").c_str(), real)) return "";
  const char* last = strrchr(real, '/');
  const std::string addr = last ? last + 1 : real;
  unsigned dom, bus, slot, fn;
  char tail;
  if (sscanf(addr.c_str(), "%x:%x:%x.%x%c", &dom, &bus, &slot, &fn, &tail) != 4) return "";  // not PCI
  std::ifstream port(dir + "/dev_port");
  if (!(port >> *devPort)) *devPort = 0;
  return addr;
}

void topoPciPorts(const std::string& sys, TopoReport* r) {
  struct Seen {
    std::string device;  // "0000:17:00": the address less its function
    int function, devPort;
  };
  Seen seen[kTopoMaxNics];
  for (int i = 0; i < r->nics; ++i) {
    TopoNic& x = r->nic[i];
    x.nic = x.port = -1;
    int devPort = 0;
    if (!x.pci[0] && !sys.empty()) snprintf(x.pci, sizeof(x.pci), "%s", pciAddressOfNet(sys, x.name, &devPort).c_str());
    const std::string addr = x.rail < 0 ? x.pci : "";
    const size_t dot = addr.rfind('.');
    seen[i] = {dot == std::string::npos ? "" : addr.substr(0, dot),
               dot == std::string::npos ? 0 : atoi(addr.c_str() + dot + 1), devPort};
  }
  int nics = 0;
  for (int i = 0; i < r->nics; ++i) {
    if (r->nic[i].nic >= 0) continue;
    r->nic[i].nic = nics++;
    if (seen[i].device.empty()) continue;
    int mates = 0, mate = -1;
    for (int j = 0; j < r->nics; ++j)
      if (j != i && seen[j].device == seen[i].device) {
        ++mates;
        mate = j;
      }
    // Exactly two ports, told apart by function or by dev_port: planes 0
    // and 1 in that order. More (a NIC split into virtual functions) stay
    // NICs of their own.
    if (mates != 1) continue;
    const Seen &a = seen[i], &b = seen[mate];
    if (a.function == b.function && a.devPort == b.devPort) continue;
    const bool aFirst = a.function != b.function ? a.function < b.function : a.devPort < b.devPort;
    r->nic[mate].nic = r->nic[i].nic;
    r->nic[i].port = aFirst ? 0 : 1;
    r->nic[mate].port = aFirst ? 1 : 0;
  }
}

namespace {

// The components of PCI device `addr`'s path in the tree ("" parts dropped).
std::vector<std::string> pciPath(const std::string& sys, const char* addr) {
  std::vector<std::string> parts;
  char real[PATH_MAX];
  if (!addr[0] || !realpath((sys + "/bus/pci/devices/" + addr).c_str(), real)) return parts;
  for (char* p = strtok(real, "/"); p; p = strtok(nullptr, "/")) parts.emplace_back(p);
  return parts;
}

}  // namespace

int topoNearestNic(const std::string& sys, const char* gpuPci, const TopoReport& r) {
  const std::vector<std::string> gpu = pciPath(sys, gpuPci);
  if (gpu.empty()) return -1;
  int best = -1;
  size_t most = 0, least = SIZE_MAX;
  for (int i = 0; i < r.nics; ++i) {
    const std::vector<std::string> nic = pciPath(sys, r.nic[i].pci);
    if (nic.empty()) continue;
    size_t shared = 0;
    while (shared < gpu.size() && shared < nic.size() && gpu[shared] == nic[shared]) ++shared;
    least = std::min(least, shared);
    if (best < 0 || shared > most) {
      best = i;
      most = shared;
    }
  }
  return best >= 0 && most > least ? best : -1;
}

}  // namespace accl
