// acclTopoPlan / acclTopoLocal: the topology planned from a layout, without a
// job (`python -m accl.topo`): what each host has, the rails and planes, the
// ring, the NICs each connection between hosts takes, the hierarchical
// algorithms' rails and the double binary trees. As JSON.
#include "api/api.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/check.h"
#include "coll/tree.h"
#include "net/net.h"
#include "topo/layout.h"
#include "topo/topo.h"

namespace {

using accl::Topology;

std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    q += c;
  }
  return q + "\"";
}

template <typename T, typename F>
std::string list(const std::vector<T>& v, F item) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + item(v[i]);
  return s + "]";
}

std::string nicName(const Topology& t, int rank, int dev) {
  for (const accl::TopoNic& n : t.hosts[t.hostOf[rank]].nics)
    if (n.dev == dev) return n.name;
  return "?";
}

// A connection from `from` to `to` (ranks of two hosts): its lanes, each
// the sender's NIC and the receiver's.
std::string hop(const Topology& t, int from, int to, bool wholeHost) {
  std::string why;
  int active = 0;
  const std::vector<int> a = accl::topoHopDevices(t, from, to, from, wholeHost, 16, &why, &active);
  const std::vector<int> b = accl::topoHopDevices(t, from, to, to, wholeHost, 16, &why, &active);
  auto pairs = [&](size_t lo, size_t hi) {
    std::string s = "[";
    for (size_t j = lo; j < hi && j < a.size() && j < b.size(); ++j)
      s += std::string(j > lo ? ", " : "") + "[" + quoted(nicName(t, from, a[j])) + ", " + quoted(nicName(t, to, b[j])) +
           "]";
    return s + "]";
  };
  const size_t own = static_cast<size_t>(active);
  return "{\"from\": " + std::to_string(from) + ", \"to\": " + std::to_string(to) + ", \"lanes\": " +
         pairs(0, own) + ", \"standby\": " + pairs(own, a.size()) +
         (why.empty() ? "" : ", \"crosses\": " + quoted(why)) + "}";
}

std::string plan(const accl::TopoLayout& l) {
  const Topology t = accl::topoBuild(l.hostKey, l.reports, l.crossNic);
  const int n = static_cast<int>(l.hostKey.size());
  std::string j = "{\"ranks\": " + std::to_string(n) + ", \"rails\": " + std::to_string(t.rails) +
                  ", \"planes\": " + std::to_string(t.planes) + ", \"source\": " + quoted(t.source) +
                  ", \"crossnic\": " + std::to_string(t.crossNic) + ",\n \"hosts\": [";
  for (size_t h = 0; h < t.hosts.size(); ++h) {
    const int first = t.hosts[h].ranks[0];
    j += std::string(h ? ",\n  " : "\n  ") + "{\"name\": " + quoted(l.hostName[l.hostKey[first] - 1]) +
         ", \"ranks\": " + list(t.hosts[h].ranks, [](int r) { return std::to_string(r); }) + ", \"nics\": " +
         list(t.hosts[h].nics, [](const accl::TopoNic& x) {
           return "{\"name\": " + quoted(x.name) + ", \"subnet\": " + quoted(x.subnet) + ", \"rail\": " +
                  std::to_string(x.rail) + ", \"plane\": " + std::to_string(x.plane) + "}";
         }) + "}";
  }
  j += "],\n \"ring\": " + list(t.ring, [](int r) { return std::to_string(r); }) + ",\n \"ring_hops\": [";
  bool any = false;
  for (size_t i = 0; i < t.ring.size() && t.hosts.size() > 1; ++i) {
    const int from = t.ring[i], to = t.ring[(i + 1) % t.ring.size()];
    if (t.hostOf[from] == t.hostOf[to]) continue;
    j += std::string(any ? ",\n  " : "\n  ") + hop(t, from, to, true);
    any = true;
  }
  // The hierarchical algorithms: hosts of as many ranks each, two or more.
  const size_t local = t.hosts.empty() ? 0 : t.hosts[0].ranks.size();
  bool hier = t.hosts.size() >= 2 && local >= 2;
  for (const accl::TopoHost& h : t.hosts) hier = hier && h.ranks.size() == local;
  j += "],\n \"hier\": " + std::string(hier ? "true" : "false") + ", \"rail_hops\": [";
  any = false;
  for (size_t h = 0; hier && h < t.hosts.size(); ++h)
    for (size_t p = 0; p < local; ++p) {
      const int from = t.hosts[h].ranks[p], to = t.hosts[(h + 1) % t.hosts.size()].ranks[p];
      j += std::string(any ? ",\n  " : "\n  ") + hop(t, from, to, false);
      any = true;
    }
  j += "],\n \"trees\": [";
  for (int k = 0; k < 2; ++k) {
    std::vector<int> parent(n);
    for (int r = 0; r < n; ++r) parent[r] = accl::treeLinks(n, r, k).parent;
    j += std::string(k ? ", " : "") + list(parent, [](int p) { return std::to_string(p); });
  }
  j += "],\n \"describe\": " + list(accl::topoDescribe(t), quoted) + "}\n";
  return j;
}

ncclResult_t give(const std::string& s, char* out, size_t len, size_t* needed, const char* fn) {
  if (needed) *needed = s.size() + 1;
  if (!out || len < s.size() + 1) {
    if (!needed) WARN("%s: the buffer holds %zu bytes, the answer needs %zu", fn, len, s.size() + 1);
    return needed ? ncclSuccess : ncclInvalidArgument;
  }
  memcpy(out, s.c_str(), s.size() + 1);
  return ncclSuccess;
}

}  // namespace

extern "C" ncclResult_t acclTopoPlan(const char* layout, char* out, size_t len, size_t* needed) {
  ACCL_API_GUARD_BEGIN
  if (!layout) {
    WARN("acclTopoPlan: layout is NULL");
    return ncclInvalidArgument;
  }
  accl::TopoLayout l;
  std::string err;
  if (!accl::topoParseLayout(layout, &l, &err)) {
    WARN("acclTopoPlan: %s", err.c_str());
    return ncclInvalidArgument;
  }
  return give(plan(l), out, len, needed, "acclTopoPlan");
  ACCL_API_GUARD_END("acclTopoPlan")
}

extern "C" ncclResult_t acclTopoLocal(char* out, size_t len, size_t* needed) {
  ACCL_API_GUARD_BEGIN
  accl::NetBackend* net = accl::netBackend();
  accl::TopoReport r{};
  if (!net) return ncclInvalidUsage;  // it WARNed
  NCCLCHECK(accl::topoReport(net, &r));
  return give(accl::topoLayoutNics(r), out, len, needed, "acclTopoLocal");
  ACCL_API_GUARD_END("acclTopoLocal")
}
