// topoBuild and what is read from its result (topo/topo.h).
#include "topo/topo.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/debug.h"

namespace accl {
namespace {

bool sameNics(const TopoReport& a, const TopoReport& b) {
  if (a.nics != b.nics) return false;
  for (int i = 0; i < a.nics; ++i)
    if (strcmp(a.nic[i].name, b.nic[i].name) != 0 || a.nic[i].dev != b.nic[i].dev ||
        a.nic[i].rail != b.nic[i].rail || a.nic[i].plane != b.nic[i].plane)
      return false;
  return true;
}

// No host has two ports on one rail and plane (else "the rail's NIC" would not name one).
bool onePortPerRailPlane(const std::vector<TopoHost>& hosts) {
  for (const TopoHost& h : hosts)
    for (size_t i = 0; i < h.nics.size(); ++i)
      for (size_t j = i + 1; j < h.nics.size(); ++j)
        if (h.nics[i].rail == h.nics[j].rail && h.nics[i].plane == h.nics[j].plane) return false;
  return true;
}

// The port 0 of n's NIC on host h where sysfs paired n with a second port;
// else n.
const TopoNic& firstPort(const TopoHost& h, const TopoNic& n) {
  if (n.port > 0)
    for (const TopoNic& m : h.nics)
      if (m.nic == n.nic && m.port == 0) return m;
  return n;
}

bool pairedPorts(const std::vector<TopoHost>& hosts) {
  for (const TopoHost& h : hosts)
    for (const TopoNic& n : h.nics)
      if (n.port >= 0) return true;
  return false;
}

// Each subnet is a rail, numbered as the hosts (in order) and their devices
// first show it: NICs on one subnet across hosts reach each other through
// one switch. With `planes`, the two ports of one NIC (sysfs) are one
// rail's planes 0 and 1, the rail named by port 0's subnet; every host's
// port 1 of a rail must then share one subnet too. False where a NIC has
// no subnet (a plugin's device), or the hosts share no rail.
bool railsBySubnet(std::vector<TopoHost>* hosts, bool planes) {
  std::vector<std::string> seen;
  std::vector<std::string> second;  // by rail: its plane-1 subnet
  for (TopoHost& h : *hosts)
    for (TopoNic& n : h.nics) {
      if (!n.subnet[0]) return false;
      const TopoNic& first = planes ? firstPort(h, n) : n;
      auto it = std::find(seen.begin(), seen.end(), first.subnet);
      n.rail = static_cast<int32_t>(it - seen.begin());
      n.plane = planes && n.port > 0 ? 1 : 0;
      if (it == seen.end()) {
        seen.push_back(first.subnet);
        second.emplace_back();
      }
      if (n.plane == 1) {
        std::string& s = second[static_cast<size_t>(n.rail)];
        if (!s.empty() && s != n.subnet) return false;
        s = n.subnet;
      }
    }
  // A subnet that is one host's plane 1 and another's rail (its ports not
  // paired there) leaves the hosts' planes apart: no planes then.
  for (const std::string& s : second)
    if (!s.empty() && std::find(seen.begin(), seen.end(), s) != seen.end()) return false;
  // Routed fabrics (a subnet per rack or per link) share none between some
  // hosts: the subnets say nothing of rails there.
  for (size_t a = 0; a < hosts->size(); ++a)
    for (size_t b = a + 1; b < hosts->size(); ++b) {
      bool shared = false;
      for (const TopoNic& x : (*hosts)[a].nics)
        for (const TopoNic& y : (*hosts)[b].nics) shared = shared || x.rail == y.rail;
      if (!shared) return false;
    }
  return true;
}

// A rail per NIC in device order (a NIC's two ports its two planes).
void railsByDevice(std::vector<TopoHost>* hosts) {
  for (TopoHost& h : *hosts) {
    int rail = 0;
    for (TopoNic& n : h.nics)
      if (&firstPort(h, n) == &n) {
        n.rail = rail++;
        n.plane = 0;
      }
    for (TopoNic& n : h.nics)
      if (&firstPort(h, n) != &n) {
        n.rail = firstPort(h, n).rail;
        n.plane = 1;
      }
  }
}

const TopoNic* portOn(const TopoHost& h, int rail, int plane) {
  for (const TopoNic& n : h.nics)
    if (n.rail == rail && n.plane == plane) return &n;
  return nullptr;
}

}  // namespace

Topology topoBuild(const std::vector<uint64_t>& hostKey, const std::vector<TopoReport>& reports, int crossNic) {
  Topology t;
  t.crossNic = crossNic;
  const int n = static_cast<int>(hostKey.size());
  t.hostOf.assign(n, -1);
  t.localOf.assign(n, 0);
  std::vector<uint64_t> keys;
  bool agree = true;
  for (int r = 0; r < n; ++r) {
    const int h = static_cast<int>(std::find(keys.begin(), keys.end(), hostKey[r]) - keys.begin());
    if (h == static_cast<int>(keys.size())) {
      keys.push_back(hostKey[r]);
      t.hosts.emplace_back();
      const TopoReport& rep = reports[r];
      t.hosts.back().nics.assign(rep.nic, rep.nic + std::clamp(rep.nics, 0, kTopoMaxNics));
    } else if (agree && !sameNics(reports[t.hosts[h].ranks[0]], reports[r])) {
      agree = false;
      WARN("ranks %d and %d are on one host but report different NICs (NCCL_SOCKET_IFNAME or ACCL_NICS differ "
           "between them?): rails are taken in device order", t.hosts[h].ranks[0], r);
    }
    t.hostOf[r] = h;
    t.localOf[r] = static_cast<int>(t.hosts[h].ranks.size());
    t.hosts[h].ranks.push_back(r);
  }
  t.nicsAgree = agree;
  bool said = true, some = false;
  for (const TopoHost& h : t.hosts)
    for (const TopoNic& x : h.nics) {
      said = said && x.rail >= 0;
      some = some || x.rail >= 0;
    }
  for (TopoHost& h : t.hosts)
    for (TopoNic& x : h.nics) x.plane = std::max(x.plane, 0);
  if (agree && said && onePortPerRailPlane(t.hosts)) {
    t.source = "declared (ACCL_NICS, or the net plugin)";
  } else {
    if (agree && some)
      WARN("the rails declared (ACCL_NICS, or the net plugin) leave a NIC without a rail or two ports of one host "
           "on one rail and plane: rails are inferred");
    const bool paired = pairedPorts(t.hosts);
    if (agree && paired && railsBySubnet(&t.hosts, true) && onePortPerRailPlane(t.hosts)) {
      t.source = "subnets, planes from the ports of each NIC (PCI)";
    } else if (agree && railsBySubnet(&t.hosts, false) && onePortPerRailPlane(t.hosts)) {
      t.source = "subnets";
    } else {
      railsByDevice(&t.hosts);
      t.source = "device order";
    }
  }
  t.nearRail.assign(n, -1);
  for (int r = 0; r < n && agree; ++r) {
    const std::vector<TopoNic>& nics = t.hosts[t.hostOf[r]].nics;
    const int near = reports[r].nearNic;
    if (near >= 0 && near < static_cast<int>(nics.size())) t.nearRail[r] = nics[near].rail;
  }
  for (const TopoHost& h : t.hosts)
    for (const TopoNic& x : h.nics) {
      t.rails = std::max(t.rails, x.rail + 1);
      t.planes = std::max(t.planes, x.plane + 1);
    }
  for (const TopoHost& h : t.hosts) t.ring.insert(t.ring.end(), h.ranks.begin(), h.ranks.end());
  for (size_t h = 0; h < t.hosts.size(); ++h) {  // hosts that lack a rail: connections take the rails both have
    std::string lacks;
    for (int rail = 0; rail < t.rails; ++rail)
      if (!portOn(t.hosts[h], rail, 0) && !portOn(t.hosts[h], rail, 1)) lacks += " " + std::to_string(rail);
    if (!lacks.empty())
      t.uneven += std::string(t.uneven.empty() ? "" : "; ") + "host " + std::to_string(h) + " (rank " +
                  std::to_string(t.hosts[h].ranks[0]) + "'s) has no rail" + lacks;
  }
  return t;
}

std::vector<int> topoHopDevices(const Topology& t, int sender, int receiver, int self, bool wholeHost, int most,
                                std::string* why, int* active) {
  why->clear();
  std::vector<int> devs;
  if (active) *active = 0;
  if (!t.nicsAgree) {
    *why = "ranks of one host reported different NICs";
    return devs;
  }
  const TopoHost& from = t.hosts[t.hostOf[sender]];
  const TopoHost& to = t.hosts[t.hostOf[receiver]];
  const TopoHost& mine = t.hosts[t.hostOf[self]];
  // (plane, rail) of the ports both hosts have: planes outer, so that where
  // `most` cuts, every rail keeps one plane before any gets its second.
  std::vector<std::pair<int, int>> shared;
  for (const TopoNic& x : from.nics)
    if (portOn(to, x.rail, x.plane)) shared.emplace_back(x.plane, x.rail);
  std::sort(shared.begin(), shared.end());
  shared.erase(std::unique(shared.begin(), shared.end()), shared.end());
  if (shared.empty()) {
    *why = "hosts " + std::to_string(t.hostOf[sender]) + " and " + std::to_string(t.hostOf[receiver]) +
           " share no rail";
    const size_t k = std::min({from.nics.size(), to.nics.size(), static_cast<size_t>(std::max(most, 1))});
    for (size_t i = 0; i < k; ++i) devs.push_back(mine.nics[i].dev);  // the i-th of each side, by position
    if (active) *active = static_cast<int>(devs.size());
    return devs;
  }
  std::vector<std::pair<int, int>> spare;  // the next rail's ports, standing by
  if (!wholeHost) {  // the sender's rail among those shared, both planes
    std::vector<int> rails;
    for (const auto& pr : shared) rails.push_back(pr.second);
    std::sort(rails.begin(), rails.end());
    rails.erase(std::unique(rails.begin(), rails.end()), rails.end());
    const int near = t.nearRail[sender];
    auto at = std::find(rails.begin(), rails.end(), near);
    if (at == rails.end()) at = rails.begin() + static_cast<long>(static_cast<size_t>(t.localOf[sender]) % rails.size());
    const int rail = *at, next = rails[static_cast<size_t>(at - rails.begin() + 1) % rails.size()];
    for (const auto& pr : shared)
      if (active && next != rail && pr.second == next) spare.push_back(pr);
    shared.erase(std::remove_if(shared.begin(), shared.end(), [&](const auto& pr) { return pr.second != rail; }),
                 shared.end());
  }
  const size_t room = static_cast<size_t>(std::max(most, 1));
  if (shared.size() > room) shared.resize(room);
  spare.resize(std::min(spare.size(), room - shared.size()));
  for (const auto& pr : shared) devs.push_back(portOn(mine, pr.second, pr.first)->dev);
  if (active) *active = static_cast<int>(devs.size());
  for (const auto& pr : spare) devs.push_back(portOn(mine, pr.second, pr.first)->dev);
  return devs;
}

std::vector<std::string> topoDescribe(const Topology& t) {
  std::vector<std::string> lines;
  lines.push_back(std::to_string(t.hosts.size()) + " hosts, " + std::to_string(t.rails) + " rail(s) x " +
                  std::to_string(t.planes) + " plane(s), rails from " + t.source);
  for (size_t h = 0; h < t.hosts.size(); ++h) {
    const TopoHost& host = t.hosts[h];
    std::string s = "host " + std::to_string(h) + " (ranks";
    for (int r : host.ranks)
      s += " " + std::to_string(r) + (t.nearRail[r] >= 0 ? " near rail " + std::to_string(t.nearRail[r]) : "");
    s += "):";
    for (const TopoNic& x : host.nics)
      s += std::string(" ") + x.name + " rail " + std::to_string(x.rail) + " plane " + std::to_string(x.plane) +
           (x.subnet[0] ? std::string(" ") + x.subnet : "") + ";";
    if (host.nics.empty()) s += " no NIC";
    lines.push_back(s);
  }
  std::string ring = "ring";
  for (int r : t.ring) ring += " " + std::to_string(r);
  lines.push_back(ring);
  return lines;
}

}  // namespace accl
