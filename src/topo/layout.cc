// Layouts (topo/layout.h).
#include "topo/layout.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "topo/pci.h"

namespace accl {
namespace {

std::vector<std::string> splitOn(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool parseRanks(const std::string& s, std::vector<int>* out) {
  for (const std::string& t : splitOn(s, ',')) {
    char* e = nullptr;
    const long r = strtol(t.c_str(), &e, 10);
    if (*e || e == t.c_str() || r < 0 || r >= (1 << 20)) return false;
    out->push_back(static_cast<int>(r));
  }
  return !out->empty();
}

bool parseNics(const std::string& s, TopoReport* r, std::string* err) {
  for (const std::string& t : splitOn(s, ',')) {
    if (r->nics == kTopoMaxNics) {
      *err = "more than " + std::to_string(kTopoMaxNics) + " NICs";
      return false;
    }
    const size_t at = t.find('@');
    const std::string word = t.substr(0, at), pci = at == std::string::npos ? "" : t.substr(at + 1);
    const size_t eq = word.find('=');
    const std::string name = word.substr(0, eq), subnet = eq == std::string::npos ? "" : word.substr(eq + 1);
    TopoNic& n = r->nic[r->nics];
    if (name.empty() || name.size() >= sizeof(n.name) || subnet.size() >= sizeof(n.subnet) ||
        pci.size() >= sizeof(n.pci) || (at != std::string::npos && pci.empty())) {
      *err = "'" + t + "' is not NIC[=SUBNET][@PCI] (a name of 1-23 characters, a PCI address of at most 15)";
      return false;
    }
    n = TopoNic{};
    strcpy(n.name, name.c_str());
    strcpy(n.subnet, subnet.c_str());
    strcpy(n.pci, pci.c_str());
    n.dev = r->nics;
    n.rail = n.plane = n.nic = n.port = -1;
    ++r->nics;
  }
  return true;
}

}  // namespace

bool topoParseLayout(const std::string& text, TopoLayout* out, std::string* err) {
  *out = TopoLayout();
  std::vector<std::vector<int>> ranks;
  std::vector<TopoReport> hosts;
  std::istringstream lines(text);
  std::string line;
  for (int no = 1; std::getline(lines, line); ++no) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.empty()) continue;
    const std::string at = "line " + std::to_string(no) + ": ";
    if (w[0] == "crossnic") {
      if (w.size() != 2 || (w[1] != "0" && w[1] != "1" && w[1] != "2")) {
        *err = at + "crossnic takes 0, 1 or 2";
        return false;
      }
      out->crossNic = w[1][0] - '0';
      continue;
    }
    if (w[0] != "host") {
      *err = at + "'" + w[0] + "': a line is 'host ...' or 'crossnic N'";
      return false;
    }
    size_t i = 1;
    out->hostName.push_back(i < w.size() && w[i] != "ranks" ? w[i++] : "host" + std::to_string(hosts.size()));
    std::vector<int> rs;
    TopoReport rep{};
    std::string rails;
    for (; i + 1 < w.size(); i += 2) {
      std::string why;
      if (w[i] == "ranks" && rs.empty() && parseRanks(w[i + 1], &rs)) continue;
      if (w[i] == "nics" && rep.nics == 0 && parseNics(w[i + 1], &rep, &why)) continue;
      if (w[i] == "rails" && rails.empty()) {
        rails = w[i + 1];
        continue;
      }
      *err = at + (why.empty() ? "'" + w[i] + " " + w[i + 1] + "' is not 'ranks R,R,...', 'nics NIC[=SUBNET],...' "
                                 "or 'rails ACCL_NICS' (each once)"
                               : why);
      return false;
    }
    if (i != w.size() || rs.empty()) {
      *err = at + "a host needs 'ranks R,R,...' (and each word its value)";
      return false;
    }
    std::string why;
    if (!rails.empty() && !topoApplyNics(rails.c_str(), &rep, &why)) {
      *err = at + "rails " + rails + ": " + why;
      return false;
    }
    topoPciPorts("", &rep);  // the ports of one NIC, from the addresses given
    ranks.push_back(rs);
    hosts.push_back(rep);
  }
  size_t n = 0;
  for (const std::vector<int>& rs : ranks) n += rs.size();
  if (n == 0) {
    *err = "no host";
    return false;
  }
  out->hostKey.assign(n, 0);
  out->reports.assign(n, TopoReport{});
  std::vector<bool> seen(n, false);
  for (size_t h = 0; h < ranks.size(); ++h)
    for (int r : ranks[h]) {
      if (static_cast<size_t>(r) >= n || seen[r]) {
        *err = "rank " + std::to_string(r) + " (of host " + out->hostName[h] + ") " +
               (static_cast<size_t>(r) >= n ? "is past the " + std::to_string(n) + " ranks listed" : "is listed twice");
        return false;
      }
      seen[r] = true;
      out->hostKey[r] = h + 1;
      out->reports[r] = hosts[h];
    }
  return true;
}

std::string topoLayoutNics(const TopoReport& r) {
  std::string nics, rails;
  for (int i = 0; i < r.nics; ++i) {
    const TopoNic& n = r.nic[i];
    nics += std::string(i ? "," : "") + n.name + (n.subnet[0] ? std::string("=") + n.subnet : "") +
            (n.pci[0] ? std::string("@") + n.pci : "");
    if (n.rail >= 0)
      rails += std::string(rails.empty() ? "" : ",") + n.name + ":" + std::to_string(n.rail) + ":" +
               std::to_string(std::max(n.plane, 0));
  }
  return (nics.empty() ? "" : "nics " + nics) + (rails.empty() ? "" : " rails " + rails);
}

}  // namespace accl
