// What a rank reports of its host's NICs (topoReport), and ACCL_NICS.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "base/debug.h"
#include "base/param.h"
#include "net/net.h"
#include "topo/pci.h"
#include "topo/topo_file.h"
#include "topo/topo.h"

namespace accl {

bool topoApplyNics(const char* spec, TopoReport* r, std::string* err) {
  std::string s(spec);
  bool named[kTopoMaxNics] = {};
  for (size_t at = 0; at <= s.size();) {
    size_t end = s.find(',', at);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(at, end - at);
    at = end + 1;
    if (item.empty()) continue;
    const size_t c1 = item.find(':');
    if (c1 == std::string::npos || c1 == 0) {
      *err = "'" + item + "' is not <name>:<rail>[:<plane>]";
      return false;
    }
    const std::string name = item.substr(0, c1);
    char* e = nullptr;
    const long rail = strtol(item.c_str() + c1 + 1, &e, 10);
    long plane = 0;
    if (e == item.c_str() + c1 + 1 || rail < 0 || rail > 63) {
      *err = "'" + item + "': the rail must be 0 to 63";
      return false;
    }
    if (*e == ':') {
      const char* p = e + 1;
      plane = strtol(p, &e, 10);
      if (e == p || plane < 0 || plane > 1) {
        *err = "'" + item + "': the plane must be 0 or 1";
        return false;
      }
    }
    if (*e) {
      *err = "'" + item + "' is not <name>:<rail>[:<plane>]";
      return false;
    }
    int i = 0;
    while (i < r->nics && name != r->nic[i].name) ++i;
    if (i == r->nics) {
      std::string have;
      for (int k = 0; k < r->nics; ++k) have += std::string(k ? ", " : "") + r->nic[k].name;
      *err = "'" + name + "' is not a NIC of this host (it has " + (have.empty() ? "none" : have) + ")";
      return false;
    }
    if (named[i]) {
      *err = "'" + name + "' is named twice";
      return false;
    }
    named[i] = true;
    r->nic[i].rail = static_cast<int32_t>(rail);
    r->nic[i].plane = static_cast<int32_t>(plane);
  }
  for (int i = 0; i < r->nics; ++i)
    if (!named[i]) {
      *err = std::string("it gives no rail to ") + r->nic[i].name + " (every NIC the network uses needs one)";
      return false;
    }
  return true;
}

namespace {

// NCCL_TOPO_FILE onto this host's report (a WARN says why where it fails).
bool applyTopoFile(const char* path, TopoReport* out) {
  std::ifstream in(path);
  std::stringstream text;
  if (!(text << in.rdbuf())) {
    WARN("NCCL_TOPO_FILE=%s: cannot be read (%s)", path, strerror(errno));
    return false;
  }
  std::string err, ignored;
  if (!topoApplyFile(text.str(), out, &err, &ignored)) {
    WARN("NCCL_TOPO_FILE=%s: %s", path, err.c_str());
    return false;
  }
  if (!ignored.empty())
    WARN("NCCL_TOPO_FILE=%s names NICs this host's network does not use: %s (ignored)", path, ignored.c_str());
  return true;
}

}  // namespace

ncclResult_t topoReport(NetBackend* net, TopoReport* out, const char* gpuPci) {
  *out = TopoReport{};  // zeroed, padding too (it travels in the allgather)
  const int n = std::min(net->devices(), kTopoMaxNics);
  for (int d = 0; d < n; ++d) {
    NetDeviceProps p;
    if (net->properties(d, &p) != ncclSuccess) continue;
    TopoNic& x = out->nic[out->nics++];
    snprintf(x.name, sizeof(x.name), "%s", p.name.c_str());
    snprintf(x.subnet, sizeof(x.subnet), "%s", p.subnet.c_str());
    x.dev = d;
    x.rail = p.rail;
    x.plane = p.plane;
    x.speedMbps = p.speedMbps;
  }
  std::string err;
  if (const char* file = paramString(Param::TopoFile); *file && !applyTopoFile(file, out)) return ncclInvalidUsage;
  const char* spec = paramString(Param::Nics);
  if (*spec && !topoApplyNics(spec, out, &err)) {
    WARN("ACCL_NICS=%s: %s", spec, err.c_str());
    return ncclInvalidUsage;
  }
  topoPciPorts("/sys", out);
  out->nearNic = topoNearestNic("/sys", gpuPci, *out);
  return ncclSuccess;
}

}  // namespace accl
