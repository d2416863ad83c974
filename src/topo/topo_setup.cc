// A communicator's topology: every rank's report of its host's NICs, one
// allgather, the same Topology on every rank (topo/topo.h).
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "base/check.h"
#include "base/debug.h"
#include "base/param.h"
#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "net/net.h"
#include "topo/topo.h"
#include "topo/topo_file.h"
#include "topo/topo_setup.h"

namespace accl {

void TopologyDeleter::operator()(Topology* t) const { delete t; }

namespace {

// NCCL_TOPO_DUMP_FILE: a file that cannot be written costs a WARN, not the init.
void dumpTopology(const Topology& t, int host, const char* path) {
  std::ofstream out(path, std::ios::trunc);
  out << topoFileXml(t, host);
  out.close();
  if (!out)
    WARN("NCCL_TOPO_DUMP_FILE=%s: cannot be written (%s)", path, strerror(errno));
  else
    INFO(kInit, "NCCL_TOPO_DUMP_FILE: host %d's NICs written to %s", host, path);
}

}  // namespace

ncclResult_t topoSetup(ncclComm* comm) {
  std::vector<TopoReport> reports(comm->nranks);
  // A rank whose report failed (a bad ACCL_NICS: it WARNed why) still joins
  // the allgather, with nics = -1, so that every rank fails now, naming it.
  if (NetBackend* net = comm->net ? comm->net : netBackend())
    if (topoReport(net, &reports[comm->rank], comm->gpuPci) != ncclSuccess) reports[comm->rank].nics = -1;
  NCCLCHECK(comm->bootstrap->allgather(reports.data(), sizeof(TopoReport)));
  for (int r = 0; r < comm->nranks; ++r)
    if (reports[r].nics == -1) {
      WARN("rank %d: rank %d could not describe its NICs (ACCL_NICS or NCCL_TOPO_FILE; its log says why)", comm->rank,
           r);
      return ncclInvalidUsage;
    }
  for (TopoReport& r : reports) {  // a peer's numbers, used as indices and strings below
    r.nics = r.nics < 0 || r.nics > kTopoMaxNics ? 0 : r.nics;
    r.nearNic = r.nearNic < 0 || r.nearNic >= r.nics ? -1 : r.nearNic;
    for (TopoNic& x : r.nic) {
      x.name[sizeof(x.name) - 1] = x.subnet[sizeof(x.subnet) - 1] = x.pci[sizeof(x.pci) - 1] = 0;
      if (x.rail > 63 || x.plane > 1 || x.rail < -1 || x.plane < -1) x.rail = x.plane = -1;
      if (x.nic < -1 || x.nic >= kTopoMaxNics || x.port < -1 || x.port > 1) x.nic = x.port = -1;
      if (x.dev < 0 || x.dev >= kTopoMaxNics) x.dev = 0;  // deviceOf takes only devices of its own backend
    }
  }
  std::vector<uint64_t> hosts(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) hosts[r] = comm->peers[r].hostHash;
  int64_t cross = paramInt(Param::CrossNic);
  if (cross < 0 || cross > 2) {
    WARN("NCCL_CROSS_NIC=%lld: 0, 1 or 2; 2 is used", static_cast<long long>(cross));
    cross = 2;
  }
  comm->topo.reset(new Topology(topoBuild(hosts, reports, static_cast<int>(cross))));
  if (comm->topo->localOf[comm->rank] == 0)
    for (const std::string& line : topoDescribe(*comm->topo))  // once per host
      INFO(kInit, "%s topology: %s", comm->name.c_str(), line.c_str());
  if (!comm->topo->uneven.empty() && comm->rank == 0)
    WARN("%s: hosts have different rails: %s; connections between two hosts take the rails both have (a rank "
         "whose own rail the other host lacks sends on another of its host's rails)",
         comm->name.c_str(), comm->topo->uneven.c_str());
  if (const char* dump = paramString(Param::TopoDumpFile); *dump && paramInt(Param::TopoDumpFileRank) == comm->rank)
    dumpTopology(*comm->topo, comm->topo->hostOf[comm->rank], dump);
  return ncclSuccess;
}

}  // namespace accl
