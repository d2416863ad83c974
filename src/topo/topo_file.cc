// Topology files (topo/topo_file.h).
#include "topo/topo_file.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "topo/xml.h"

namespace accl {
namespace {

bool number(const std::string* s, long lo, long hi, long* out) {
  if (!s) return false;
  char* end = nullptr;
  const long v = strtol(s->c_str(), &end, 0);
  if (s->empty() || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// Applies the <net> elements under n (busid: the nearest <pci> above).
bool walk(const XmlNode& n, const std::string& busid, TopoReport* r, std::string* err, std::string* ignored) {
  const std::string* own = n.name == "pci" ? n.attr("busid") : nullptr;
  const std::string& pci = own ? *own : busid;
  if (n.name == "net") {
    const std::string* name = n.attr("name");
    if (!name) {
      *err = "a <net> element without a name";
      return false;
    }
    int i = 0;
    while (i < r->nics && *name != r->nic[i].name) ++i;
    if (i == r->nics) {
      *ignored += (ignored->empty() ? "" : ", ") + *name;
      return true;
    }
    TopoNic& x = r->nic[i];
    if (!pci.empty()) snprintf(x.pci, sizeof(x.pci), "%s", pci.c_str());
    long v = 0;
    if (number(n.attr("speed"), 1, INT32_MAX, &v)) x.speedMbps = static_cast<int32_t>(v);
    const std::string *rail = n.attr("rail"), *plane = n.attr("plane");
    if (rail) {
      if (!number(rail, 0, 63, &v)) {
        *err = "<net name=\"" + *name + "\">: rail=\"" + *rail + "\" is not 0 to 63";
        return false;
      }
      x.rail = static_cast<int32_t>(v);
      x.plane = 0;
    }
    if (plane) {
      if (!rail || !number(plane, 0, 1, &v)) {
        *err = "<net name=\"" + *name + "\">: plane=\"" + *plane + "\" is not 0 or 1 (with a rail)";
        return false;
      }
      x.plane = static_cast<int32_t>(v);
    }
  }
  for (const XmlNode& c : n.children)
    if (!walk(c, pci, r, err, ignored)) return false;
  return true;
}

}  // namespace

bool topoApplyFile(const std::string& text, TopoReport* r, std::string* err, std::string* ignored) {
  XmlNode root;
  if (!xmlParse(text, &root, err)) return false;
  for (const XmlNode& n : root.children)
    if (n.name == "system") return walk(n, "", r, err, ignored);
  *err = "no <system> element";
  return false;
}

std::string topoFileXml(const Topology& t, int host) {
  const TopoHost& h = t.hosts[static_cast<size_t>(host)];
  std::string ranks;
  for (int rank : h.ranks) ranks += " " + std::to_string(rank);
  std::string x = "<system version=\"1\">\n  <!-- ACCL: host " + std::to_string(host) + " of " +
                  std::to_string(t.hosts.size()) + " (ranks" + ranks + "), " + std::to_string(t.rails) +
                  " rail(s) x " + std::to_string(t.planes) + " plane(s), rails from " + t.source + " -->\n";
  for (const TopoNic& n : h.nics) {
    const bool pci = n.pci[0] != 0;
    const std::string in = pci ? "      " : "    ";
    if (pci) x += "  <pci busid=\"" + xmlEscape(n.pci) + "\">\n";
    x += in.substr(2) + "<nic>\n" + in + "<net name=\"" + xmlEscape(n.name) + "\" dev=\"" + std::to_string(n.dev) +
         "\" speed=\"" + std::to_string(n.speedMbps) + "\" rail=\"" + std::to_string(n.rail) + "\" plane=\"" +
         std::to_string(n.plane) + "\"" + (n.subnet[0] ? " subnet=\"" + xmlEscape(n.subnet) + "\"" : "") + "/>\n" +
         in.substr(2) + "</nic>\n";
    if (pci) x += "  </pci>\n";
  }
  return x + "</system>\n";
}

}  // namespace accl
