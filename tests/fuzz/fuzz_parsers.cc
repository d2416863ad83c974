// The parsers of what a user writes: a configuration file, an integer
// parameter, NCCL_ALGO and NCCL_PROTO, NCCL_SOCKET_IFNAME, ACCL_NICS, a
// topology layout (first byte 'L': parsed, then planned), a topology file
// (first byte 'X': read onto four NICs, planned, dumped). The first byte
// picks the parser, the rest is its text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/param.h"
#include "bootstrap/interfaces.h"
#include "coll/tuner.h"
#include "core/ops.h"
#include "topo/layout.h"
#include "topo/pci.h"
#include "topo/topo.h"
#include "topo/topo_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string err;
  if (data[0] == 'L') {
    accl::TopoLayout l;
    if (!accl::topoParseLayout(text, &l, &err) || l.hostKey.size() > 256) return 0;
    const accl::Topology t = accl::topoBuild(l.hostKey, l.reports, l.crossNic);
    (void)accl::topoDescribe(t);
    for (size_t i = 0; i + 1 < t.ring.size(); ++i)
      for (int self : {t.ring[i], t.ring[i + 1]}) (void)accl::topoHopDevices(t, t.ring[i], t.ring[i + 1], self, i % 2, 16, &err);
    return 0;
  }
  if (data[0] == 'X') {  // a topology file (NCCL_TOPO_FILE) over a host of four NICs, and its dump
    accl::TopoReport r{};
    r.nics = 4;
    for (int i = 0; i < 4; ++i) {
      snprintf(r.nic[i].name, sizeof(r.nic[i].name), "eth%d", i);
      r.nic[i].rail = r.nic[i].plane = -1;
    }
    std::string ignored;
    if (!accl::topoApplyFile(text, &r, &err, &ignored)) return 0;
    accl::topoPciPorts("/nonexistent", &r);
    const accl::Topology t = accl::topoBuild({1, 2}, {r, r}, 2);
    (void)accl::topoFileXml(t, 1);
    return 0;
  }
  switch (data[0] % 6) {
    case 0:
      (void)accl::parseConfText(text);
      break;
    case 1: {
      int64_t v = 0;
      (void)accl::parseIntValue(text.c_str(), &v);
      break;
    }
    case 2: {
      accl::AlgoMask mask;
      (void)accl::parseAlgoSpec(text.c_str(), &mask, &err);
      break;
    }
    case 3:
      (void)accl::parseProtoSpec(text.c_str(), &err);
      break;
    case 4: {
      const accl::IfSpec spec = accl::parseIfSpec(text.c_str());
      for (const char* name : {"eth0", "ib0", "lo", "docker0", ""}) (void)accl::ifMatches(spec, name);
      break;
    }
    default: {  // ACCL_NICS over a host of four NICs
      accl::TopoReport r{};
      r.nics = 4;
      for (int i = 0; i < 4; ++i) {
        snprintf(r.nic[i].name, sizeof(r.nic[i].name), "eth%d", i);
        r.nic[i].rail = r.nic[i].plane = -1;
      }
      (void)accl::topoApplyNics(text.c_str(), &r, &err);
      break;
    }
  }
  return 0;
}
