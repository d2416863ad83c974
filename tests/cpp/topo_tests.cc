// Unit tests of the topology (topo/topo.h) on fixtures: hosts x ranks x
// rails x planes, NICs listed in different orders, missing NICs, uneven
// hosts, rails from subnets, from declarations and in device order.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "test_harness.h"

#include "topo/pci.h"
#include "topo/topo.h"
#include "topo/topo_file.h"
#include "topo/xml.h"

namespace {

using namespace accl;

TopoNic nic(const std::string& name, int dev, const std::string& subnet, int rail = -1, int plane = -1) {
  TopoNic x{};
  snprintf(x.name, sizeof(x.name), "%s", name.c_str());
  snprintf(x.subnet, sizeof(x.subnet), "%s", subnet.c_str());
  x.dev = dev;
  x.rail = rail;
  x.plane = plane;
  x.nic = x.port = -1;
  return x;
}

TopoReport report(const std::vector<TopoNic>& nics) {
  TopoReport r{};
  for (const TopoNic& x : nics) r.nic[r.nics++] = x;
  return r;
}

// `perHost` ranks on each host, host by host; host h's NICs from nicsOf(h).
template <typename NicsOf>
Topology layout(int hosts, int perHost, NicsOf nicsOf, int crossNic = 2) {
  std::vector<uint64_t> keys;
  std::vector<TopoReport> reports;
  for (int h = 0; h < hosts; ++h)
    for (int i = 0; i < perHost; ++i) {
      keys.push_back(100 + h);
      reports.push_back(report(nicsOf(h)));
    }
  return topoBuild(keys, reports, crossNic);
}

std::string str(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

std::string hop(const Topology& t, int from, int to, int self, bool whole, int most = 4) {
  std::string why;
  return str(topoHopDevices(t, from, to, self, whole, most, &why));
}

// The rails of `devs` on `self`'s host.
std::string rails(const Topology& t, int from, int to, int self, bool whole, int most = 4) {
  std::string why;
  std::vector<int> r;
  for (int d : topoHopDevices(t, from, to, self, whole, most, &why))
    for (const TopoNic& x : t.hosts[t.hostOf[self]].nics)
      if (x.dev == d) r.push_back(x.rail * 10 + x.plane);
  return str(r);
}

}  // namespace

TEST(topo_rails_from_subnets) {
  // 2 hosts x 4 ranks x 4 rails, one subnet per rail.
  Topology t = layout(2, 4, [](int) {
    std::vector<TopoNic> v;
    for (int r = 0; r < 4; ++r) v.push_back(nic("nic" + std::to_string(r), r, "10.0." + std::to_string(r) + ".0/24"));
    return v;
  });
  CHECK_EQ(t.rails, 4);
  CHECK_EQ(t.planes, 1);
  CHECK_EQ(std::string(t.source), std::string("subnets"));
  CHECK_EQ(str(t.ring), std::string("0,1,2,3,4,5,6,7"));
  CHECK_EQ(hop(t, 3, 4, 3, true), std::string("0,1,2,3"));  // the ring's hop: every rail
  CHECK_EQ(hop(t, 3, 4, 4, true), std::string("0,1,2,3"));
  CHECK_EQ(hop(t, 3, 4, 3, true, 2), std::string("0,1"));  // a backend that merges two
  CHECK_EQ(hop(t, 1, 6, 1, false), std::string("1"));      // point-to-point: the sender's rail, both ends
  CHECK_EQ(hop(t, 1, 6, 6, false), std::string("1"));
  CHECK_EQ(hop(t, 6, 1, 1, false), std::string("2"));
}

TEST(topo_lanes_pair_rails_whatever_the_device_order) {
  // Host 1 lists its NICs in another order: lane j still joins one rail.
  Topology t = layout(2, 1, [](int h) {
    std::vector<TopoNic> v;
    const int order[2][3] = {{0, 1, 2}, {2, 0, 1}};
    for (int d = 0; d < 3; ++d) {
      const int r = order[h][d];
      v.push_back(nic("eth" + std::to_string(d), d, "192.168." + std::to_string(r) + ".0/24"));
    }
    return v;
  });
  CHECK_EQ(rails(t, 0, 1, 0, true), std::string("0,10,20"));
  CHECK_EQ(rails(t, 0, 1, 1, true), std::string("0,10,20"));
  CHECK_EQ(hop(t, 0, 1, 0, true), std::string("0,1,2"));
  CHECK_EQ(hop(t, 0, 1, 1, true), std::string("1,2,0"));  // host 1's devices of rails 0, 1, 2
}

TEST(topo_declared_planes) {
  // 2 hosts x 2 ranks x 2 rails x 2 planes, declared (ACCL_NICS or a plugin).
  Topology t = layout(2, 2, [](int) {
    return std::vector<TopoNic>{nic("a", 0, "", 0, 0), nic("b", 1, "", 0, 1), nic("c", 2, "", 1, 0),
                                nic("d", 3, "", 1, 1)};
  });
  CHECK_EQ(t.rails, 2);
  CHECK_EQ(t.planes, 2);
  CHECK(std::string(t.source).find("declared") == 0);
  CHECK_EQ(rails(t, 1, 2, 1, true), std::string("0,10,1,11"));  // planes outer: each rail before any second plane
  CHECK_EQ(rails(t, 1, 2, 1, true, 2), std::string("0,10"));
  CHECK_EQ(rails(t, 1, 3, 3, false), std::string("10,11"));  // sender 1 (its host's second): rail 1, both planes
  CHECK_EQ(rails(t, 2, 0, 0, false), std::string("0,1"));
}

TEST(topo_missing_nic_and_uneven_hosts) {
  // Ranks of three hosts interleaved; host 2 lacks rail 1.
  std::vector<uint64_t> keys = {7, 8, 7, 9, 8, 8};
  auto nics = [](bool all) {
    std::vector<TopoNic> v = {nic("n0", 0, "10.1.0.0/16")};
    if (all) v.push_back(nic("n1", 1, "10.2.0.0/16"));
    return report(v);
  };
  std::vector<TopoReport> reports = {nics(true), nics(true), nics(true), nics(false), nics(true), nics(true)};
  Topology t = topoBuild(keys, reports, 2);
  CHECK_EQ(t.hosts.size(), 3u);
  CHECK_EQ(str(t.ring), std::string("0,2,1,4,5,3"));  // host by host, in the order of their lowest rank
  CHECK_EQ(t.localOf[5], 2);
  CHECK_EQ(hop(t, 5, 3, 5, true), std::string("0"));  // only rail 0 reaches host 2
  CHECK_EQ(hop(t, 5, 3, 3, true), std::string("0"));
  CHECK_EQ(hop(t, 4, 0, 4, false), std::string("1"));  // rank 4, second of its host: rail 1
  CHECK_EQ(t.uneven, std::string("host 2 (rank 3's) has no rail 1"));  // said in a WARN at init
  CHECK(layout(2, 1, [](int) { return std::vector<TopoNic>{nic("n0", 0, "10.1.0.0/16")}; }).uneven.empty());
}

TEST(topo_no_shared_rail_and_cross_nic) {
  auto nicsOf = [](int h) {
    return std::vector<TopoNic>{nic("x", 0, "", h ? 1 : 0, 0)};  // declared: host 0 on rail 0, host 1 on rail 1
  };
  std::string why;
  Topology t2 = layout(2, 1, nicsOf, 2);
  CHECK_EQ(str(topoHopDevices(t2, 0, 1, 0, true, 4, &why)), std::string("0"));  // the first NIC of each side
  CHECK(why.find("share no rail") != std::string::npos);
  Topology t0 = layout(2, 1, nicsOf, 0);  // 0 asks for one rail; with none shared, the same pairing (and a WARN)
  CHECK_EQ(str(topoHopDevices(t0, 0, 1, 1, true, 4, &why)), std::string("0"));
  CHECK(why.find("share no rail") != std::string::npos);
}

TEST(topo_routed_subnets_take_device_order) {
  // A subnet per host (routed fabrics): hosts share none, so subnets are not rails.
  Topology t = layout(2, 1, [](int h) {
    return std::vector<TopoNic>{nic("e0", 0, "10." + std::to_string(h) + ".0.0/24"),
                                nic("e1", 1, "10." + std::to_string(h) + ".1.0/24")};
  });
  CHECK_EQ(std::string(t.source), std::string("device order"));
  std::string why;
  CHECK_EQ(str(topoHopDevices(t, 0, 1, 1, true, 4, &why)), std::string("0,1"));
  CHECK(why.empty());
}

TEST(topo_flat_subnet_takes_device_order) {
  // Every NIC on one subnet: the subnets cannot tell rails apart.
  Topology t = layout(2, 1, [](int) {
    return std::vector<TopoNic>{nic("e0", 0, "10.0.0.0/16"), nic("e1", 1, "10.0.0.0/16")};
  });
  CHECK_EQ(std::string(t.source), std::string("device order"));
  CHECK_EQ(t.rails, 2);
  CHECK_EQ(hop(t, 0, 1, 1, true), std::string("0,1"));
}

TEST(topo_ranks_of_a_host_that_disagree) {
  std::vector<uint64_t> keys = {1, 1, 2};
  std::vector<TopoReport> reports = {report({nic("a", 0, "10.0.0.0/24")}), report({nic("b", 0, "10.0.1.0/24")}),
                                     report({nic("a", 0, "10.0.0.0/24")})};
  Topology t = topoBuild(keys, reports, 2);
  CHECK(!t.nicsAgree);
  std::string why;
  CHECK(topoHopDevices(t, 1, 2, 1, true, 4, &why).empty());
  CHECK(!why.empty());
  CHECK_EQ(str(t.ring), std::string("0,1,2"));
}

TEST(topo_accl_nics_grammar) {
  TopoReport r = report({nic("eth0", 0, ""), nic("eth1", 1, ""), nic("eth2", 2, "")});
  std::string err;
  CHECK(topoApplyNics("eth0:0:0,eth1:0:1,eth2:5", &r, &err));
  CHECK_EQ(r.nic[1].rail * 10 + r.nic[1].plane, 1);
  CHECK_EQ(r.nic[2].rail * 10 + r.nic[2].plane, 50);
  const char* bad[] = {"eth0:0,eth1:1",                   // eth2 left out
                       "eth0:0,eth1:1,eth2:2,eth9:3",     // no such NIC
                       "eth0:0,eth0:1,eth1:1,eth2:2",     // named twice
                       "eth0:64,eth1:1,eth2:2",           // rail out of range
                       "eth0:0:2,eth1:1,eth2:2",          // plane out of range
                       "eth0:x,eth1:1,eth2:2", "eth0,eth1:1,eth2:2", "eth0:1:0:0,eth1:1,eth2:2"};
  for (const char* spec : bad) {
    TopoReport b = report({nic("eth0", 0, ""), nic("eth1", 1, ""), nic("eth2", 2, "")});
    err.clear();
    CHECK(!topoApplyNics(spec, &b, &err));
    CHECK(!err.empty());
  }
}

TEST(topo_describe) {
  Topology t = layout(2, 1, [](int) { return std::vector<TopoNic>{nic("nic0", 0, "10.0.0.0/24")}; });
  std::vector<std::string> lines = topoDescribe(t);
  CHECK_EQ(lines.size(), 4u);
  CHECK(lines[0].find("2 hosts, 1 rail(s) x 1 plane(s)") == 0);
  CHECK(lines[1].find("nic0 rail 0 plane 0 10.0.0.0/24") != std::string::npos);
  CHECK_EQ(lines[3], std::string("ring 0 1"));
}

namespace {

// A sysfs tree of PCI NICs under a temporary root: interface -> its
// device's address (and dev_port where given); "" an interface of no device.
struct FakeSys {
  std::string root;
  explicit FakeSys(const std::vector<std::tuple<std::string, std::string, int>>& ifaces) {
    char tmpl[] = "/tmp/accl-sysfs-XXXXXX";
    root = mkdtemp(tmpl);
    for (const auto& [name, addr, devPort] : ifaces) {
      const std::string net = root + "/class/net/" + name;
      CHECK_EQ(system(("mkdir -p " + net).c_str()), 0);
      if (addr.empty()) continue;
      const std::string dev = root + "/devices/pci0000:00/0000:00:01.0/" + addr;
      CHECK_EQ(system(("mkdir -p " + dev).c_str()), 0);
      CHECK_EQ(symlink(dev.c_str(), (net + "/device").c_str()), 0);
      FILE* f = fopen((net + "/dev_port").c_str(), "w");
      fprintf(f, "%d\n", devPort);
      fclose(f);
    }
  }
  ~FakeSys() { (void)!system(("rm -rf " + root).c_str()); }
};

}  // namespace

TEST(topo_pci_ports_of_one_nic) {
  // Functions .0/.1 of one device (listed port 1 first), one function's
  // dev_port 0/1, a single-port NIC, four virtual functions of one device
  // (not two ports: NICs of their own), a veth, one declared by ACCL_NICS.
  FakeSys sys({{"ens17f1", "0000:17:00.1", 0}, {"ens17f0", "0000:17:00.0", 0}, {"ens31", "0000:31:00.0", 0},
               {"mp0", "0000:4b:00.0", 0}, {"mp1", "0000:4b:00.0", 1}, {"vf0", "0000:60:00.0", 0},
               {"vf1", "0000:60:00.1", 0}, {"vf2", "0000:60:00.2", 0}, {"veth0", "", 0}, {"ens99f0", "0000:99:00.0", 0},
               {"ens99f1", "0000:99:00.1", 0}});
  int port = -1;
  CHECK_EQ(pciAddressOfNet(sys.root, "mp1", &port), std::string("0000:4b:00.0"));
  CHECK_EQ(port, 1);
  CHECK_EQ(pciAddressOfNet(sys.root, "veth0", &port), std::string(""));
  CHECK_EQ(pciAddressOfNet(sys.root, "nosuch", &port), std::string(""));
  TopoReport r = report({nic("ens17f1", 0, ""), nic("ens17f0", 1, ""), nic("ens31", 2, ""), nic("mp0", 3, ""),
                         nic("mp1", 4, ""), nic("vf0", 5, ""), nic("vf1", 6, ""), nic("vf2", 7, ""),
                         nic("veth0", 8, ""), nic("ens99f0", 9, "", 5, 0), nic("ens99f1", 10, "", 6, 0)});
  topoPciPorts(sys.root, &r);
  std::string got;
  for (int i = 0; i < r.nics; ++i)
    got += std::string(r.nic[i].name) + "=" + std::to_string(r.nic[i].nic) + "." + std::to_string(r.nic[i].port) + " ";
  CHECK_EQ(got, std::string("ens17f1=0.1 ens17f0=0.0 ens31=1.-1 mp0=2.0 mp1=2.1 vf0=3.-1 vf1=4.-1 vf2=5.-1 "
                            "veth0=6.-1 ens99f0=7.-1 ens99f1=8.-1 "));
}

namespace {

// Host h's two dual-port NICs: a (rail subnets 10.0.0/24, plane 1 on
// 10.0.1/24) and b (10.1.0/24, 10.1.1/24), listed as `order` says.
std::vector<TopoNic> dualPorts(bool reversed, const std::string& aPlane1 = "10.0.1.0/24") {
  auto port = [](const char* name, int dev, const std::string& subnet, int nicNo, int p) {
    TopoNic x = nic(name, dev, subnet);
    x.nic = nicNo;
    x.port = p;
    return x;
  };
  if (reversed)
    return {port("b1", 0, "10.1.1.0/24", 0, 1), port("b0", 1, "10.1.0.0/24", 0, 0), port("a1", 2, aPlane1, 1, 1),
            port("a0", 3, "10.0.0.0/24", 1, 0)};
  return {port("a0", 0, "10.0.0.0/24", 0, 0), port("a1", 1, aPlane1, 0, 1), port("b0", 2, "10.1.0.0/24", 1, 0),
          port("b1", 3, "10.1.1.0/24", 1, 1)};
}

}  // namespace

TEST(topo_two_ports_of_a_nic_are_one_rails_planes) {
  // 2 hosts x 2 ranks; host 1 lists its ports in another order. Rails from
  // port 0's subnet, planes from the ports: 2 rails x 2 planes, each hop
  // joining one rail's one plane on both sides.
  Topology t = layout(2, 2, [](int h) { return dualPorts(h == 1); });
  CHECK_EQ(t.rails, 2);
  CHECK_EQ(t.planes, 2);
  CHECK(std::string(t.source).find("planes from the ports") != std::string::npos);
  CHECK_EQ(hop(t, 0, 2, 0, true), std::string("0,2,1,3"));  // a0 b0 a1 b1
  CHECK_EQ(hop(t, 0, 2, 2, true), std::string("3,1,2,0"));  // host 1's a0 b0 a1 b1
  CHECK_EQ(rails(t, 1, 3, 3, false), std::string("10,11"));  // sender 1: rail 1 (b), both planes
  // Port 1's subnets that differ between hosts are no plane: each subnet its own rail.
  Topology u = layout(2, 1, [](int h) { return dualPorts(false, h ? "10.9.1.0/24" : "10.0.1.0/24"); });
  CHECK_EQ(std::string(u.source), std::string("subnets"));
  CHECK_EQ(u.planes, 1);
  // Ports paired on one host only (the other's sysfs says nothing, a VM's):
  // a subnet that is one host's plane 1 and the other's rail: no planes.
  Topology w = layout(2, 1, [](int h) {
    std::vector<TopoNic> x = dualPorts(false);
    if (h == 1)
      for (TopoNic& n : x) n.nic = n.port = -1;
    return x;
  });
  CHECK_EQ(std::string(w.source), std::string("subnets"));
  CHECK(w.rails == 4 && w.planes == 1 && w.uneven.empty());
  // No subnets (a plugin's devices): rails in device order, the ports planes.
  Topology v = layout(2, 1, [](int h) {
    std::vector<TopoNic> x = dualPorts(h == 1);
    for (TopoNic& n : x) n.subnet[0] = 0;
    return x;
  });
  CHECK_EQ(std::string(v.source), std::string("device order"));
  CHECK_EQ(v.rails, 2);
  CHECK_EQ(v.planes, 2);
}

TEST(topo_xml_reads_what_topology_files_hold) {
  XmlNode root;
  std::string err;
  const std::string text =
      "<?xml version=\"1.0\"?>\n<!-- a comment -->\n<system version='1'>\n"
      "  <cpu numaid=\"0\" affinity=\"ff\">\n"
      "    <pci busid=\"0000:17:00.0\" class=\"0x020000\"><nic><net name=\"a&amp;b\" speed=\"200000\"/></nic></pci>\n"
      "    text is skipped\n  </cpu>\n</system>\n";
  CHECK(xmlParse(text, &root, &err));
  CHECK_EQ(root.children.size(), 1u);
  const XmlNode& sys = root.children[0];
  CHECK_EQ(sys.name, std::string("system"));
  CHECK_EQ(*sys.attr("version"), std::string("1"));
  CHECK_EQ(*sys.children[0].children[0].children[0].children[0].attr("name"), std::string("a&b"));
  CHECK(sys.attr("nope") == nullptr);
  // Each bad file says what and on which line.
  const std::pair<const char*, const char*> bad[] = {
      {"<system>\n<cpu>\n</system>", "line 3: </system> closes <cpu>"},
      {"<system a=1/>", "line 1: an attribute's value must be quoted"},
      {"<system a='1' a='2'/>", "line 1: attribute a given twice"},
      {"<system a='&nbsp;'/>", "line 1: an unknown entity in an attribute's value"},
      {"<system>", "line 1: <system> is never closed"},
      {"<!-- open", "line 1: a comment that never ends"},
      {"</system>", "line 1: a closing tag with nothing open"},
      {"<system a='1'", "line 1: <system> never ends"},
  };
  for (const auto& [text2, why] : bad) {
    CHECK(!xmlParse(text2, &root, &err));
    CHECK_EQ(err, std::string(why));
  }
  std::string deep;
  for (int i = 0; i < 70; ++i) deep += "<a>";
  CHECK(!xmlParse(deep, &root, &err));
  CHECK(err.find("nested too deep") != std::string::npos);
  CHECK_EQ(xmlEscape("a<\"&'>"), std::string("a&lt;&quot;&amp;&apos;&gt;"));
  std::string many = "<system";
  for (int i = 0; i < 100; ++i) many += " a" + std::to_string(i) + "='1'";
  CHECK(!xmlParse(many + "/>", &root, &err));
  CHECK_EQ(err, std::string("line 1: <system> has too many attributes"));
}

TEST(topo_file_gives_pci_addresses_speeds_rails) {
  TopoReport r = report({nic("ens17f0", 0, "10.0.0.0/24"), nic("ens17f1", 1, "10.0.1.0/24"), nic("eth9", 2, "")});
  std::string err, ignored;
  const std::string file =
      "<system version=\"1\"><cpu>"
      "<pci busid=\"0000:17:00.1\"><nic><net name=\"ens17f1\" speed=\"200000\"/></nic></pci>"
      "<pci busid=\"0000:17:00.0\"><nic><net name=\"ens17f0\" speed=\"200000\"/></nic></pci>"
      "<nic><net name=\"eth9\" rail=\"3\" plane=\"1\"/></nic>"
      "<pci busid=\"0000:b3:00.0\"><nic><net name=\"mlx5_4\"/><net name=\"mlx5_5\"/></nic></pci>"
      "</cpu></system>";
  CHECK(topoApplyFile(file, &r, &err, &ignored));
  CHECK_EQ(ignored, std::string("mlx5_4, mlx5_5"));
  CHECK_EQ(std::string(r.nic[0].pci), std::string("0000:17:00.0"));
  CHECK_EQ(r.nic[1].speedMbps, 200000);
  CHECK(r.nic[2].rail == 3 && r.nic[2].plane == 1 && r.nic[2].pci[0] == 0);
  topoPciPorts("/nonexistent", &r);  // the file's addresses, not sysfs: ens17f0/1 are one NIC's ports
  CHECK(r.nic[0].nic == r.nic[1].nic && r.nic[0].port == 0 && r.nic[1].port == 1 && r.nic[2].port == -1);
  const std::pair<const char*, const char*> bad[] = {
      {"<topology/>", "no <system> element"},
      {"<system><net name='ens17f0' rail='64'/></system>", "<net name=\"ens17f0\">: rail=\"64\" is not 0 to 63"},
      {"<system><net name='ens17f0' plane='1'/></system>", "<net name=\"ens17f0\">: plane=\"1\" is not 0 or 1 (with a rail)"},
      {"<system><net speed='1'/></system>", "a <net> element without a name"},
      {"<system><net name='x'></system>", "line 1: </system> closes <net>"},
  };
  for (const auto& [text, why] : bad) {
    TopoReport q = r;
    CHECK(!topoApplyFile(text, &q, &err, &ignored));
    CHECK_EQ(err, std::string(why));
  }
}

TEST(topo_dump_file_reads_back) {
  // 2 hosts of dual-port NICs (rails from subnets, planes from PCI): host
  // 1's dump, read back onto host 1's NICs, declares the same rails and
  // planes, and the same PCI addresses.
  auto withPci = [](int h) {
    std::vector<TopoNic> v = dualPorts(h == 1);
    for (TopoNic& n : v) snprintf(n.pci, sizeof(n.pci), "0000:%02x:00.%d", 0x17 + 0x20 * n.nic, n.port);
    return v;
  };
  Topology t = layout(2, 1, withPci);
  const std::string xml = topoFileXml(t, 1);
  CHECK(xml.find("rails from subnets, planes from the ports") != std::string::npos);
  std::vector<TopoNic> fresh = withPci(1);
  for (TopoNic& n : fresh) n.pci[0] = 0;
  TopoReport r = report(fresh);
  std::string err, ignored;
  CHECK(topoApplyFile(xml, &r, &err, &ignored));
  CHECK(ignored.empty());
  for (int i = 0; i < r.nics; ++i) {
    CHECK_EQ(r.nic[i].rail, t.hosts[1].nics[i].rail);
    CHECK_EQ(r.nic[i].plane, t.hosts[1].nics[i].plane);
    CHECK_EQ(std::string(r.nic[i].pci), std::string(t.hosts[1].nics[i].pci));
  }
}

TEST(topo_each_gpu_takes_the_rail_of_its_nearest_nic) {
  // A host whose PCI tree puts GPU 0 under switch A with NIC b's ports and
  // GPU 1 under switch B with NIC a's: GPU 0's rank sends on rail 1 (b),
  // GPU 1's on rail 0 (a), against their places on the host. A GPU on a
  // root port of its own is no nearer any NIC: the place decides.
  char tmpl[] = "/tmp/accl-pcitree-XXXXXX";
  const std::string root = mkdtemp(tmpl);
  auto device = [&](const std::string& path) {
    const std::string dir = root + "/devices/" + path;
    CHECK_EQ(system(("mkdir -p " + dir + " " + root + "/bus/pci/devices").c_str()), 0);
    const std::string addr = path.substr(path.rfind('/') + 1);
    CHECK_EQ(symlink(dir.c_str(), (root + "/bus/pci/devices/" + addr).c_str()), 0);
  };
  device("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0");  // switch A: GPU 0
  device("pci0000:00/0000:00:01.0/0000:01:00.0/0000:03:00.0");  // switch A: NIC b, port 0
  device("pci0000:00/0000:00:01.0/0000:01:00.0/0000:03:00.1");  //           port 1
  device("pci0000:00/0000:00:02.0/0000:11:00.0/0000:12:00.0");  // switch B: GPU 1
  device("pci0000:00/0000:00:02.0/0000:11:00.0/0000:13:00.0");  // switch B: NIC a, port 0
  device("pci0000:00/0000:00:02.0/0000:11:00.0/0000:13:00.1");  //           port 1
  device("pci0000:80/0000:80:01.0/0000:81:00.0");               // GPU 2, alone
  auto nics = [](int) {
    std::vector<TopoNic> v = dualPorts(false);  // a0 a1 b0 b1
    const char* addr[] = {"0000:13:00.0", "0000:13:00.1", "0000:03:00.0", "0000:03:00.1"};
    for (size_t i = 0; i < v.size(); ++i) snprintf(v[i].pci, sizeof(v[i].pci), "%s", addr[i]);
    return v;
  };
  TopoReport r = report(nics(0));
  CHECK_EQ(topoNearestNic(root, "0000:02:00.0", r), 2);  // b0
  CHECK_EQ(topoNearestNic(root, "0000:12:00.0", r), 0);  // a0
  CHECK_EQ(topoNearestNic(root, "0000:81:00.0", r), -1);
  CHECK_EQ(topoNearestNic(root, "", r), -1);
  std::vector<uint64_t> keys;
  std::vector<TopoReport> reports;
  const char* gpus[] = {"0000:02:00.0", "0000:12:00.0", "0000:81:00.0"};
  for (int h = 0; h < 2; ++h)
    for (int g = 0; g < 3; ++g) {
      keys.push_back(100 + h);
      reports.push_back(report(nics(h)));
      reports.back().nearNic = topoNearestNic(root, gpus[g], reports.back());
    }
  Topology t = topoBuild(keys, reports, 2);
  CHECK_EQ(t.rails, 2);
  CHECK_EQ(rails(t, 0, 3, 3, false), std::string("10,11"));  // GPU 0's rank: rail 1 (b), both planes
  CHECK_EQ(rails(t, 1, 4, 4, false), std::string("0,1"));    // GPU 1's: rail 0 (a)
  CHECK_EQ(rails(t, 2, 5, 5, false), std::string("0,1"));    // GPU 2's: its place, 2 mod 2 rails
  CHECK(topoDescribe(t)[1].find("(ranks 0 near rail 1 1 near rail 0 2):") != std::string::npos);
  (void)!system(("rm -rf " + root).c_str());
}

TEST(topo_a_rails_connection_gets_the_next_rail_to_stand_by) {
  // 2 hosts x 2 ranks x 3 rails x 2 planes (declared): a connection on the
  // sender's rail gets the next shared rail's two ports after its own two;
  // a ring's hop (every rail) and one rail shared get none.
  Topology t = layout(2, 3, [](int) {
    std::vector<TopoNic> v;
    for (int rail = 0; rail < 3; ++rail)
      for (int plane = 0; plane < 2; ++plane)
        v.push_back(nic("n" + std::to_string(rail) + std::to_string(plane), rail * 2 + plane, "", rail, plane));
    return v;
  });
  std::string why;
  int active = -1;
  CHECK_EQ(str(topoHopDevices(t, 1, 4, 1, false, 16, &why, &active)), std::string("2,3,4,5"));  // rail 1, then 2
  CHECK_EQ(active, 2);
  CHECK_EQ(str(topoHopDevices(t, 2, 5, 2, false, 16, &why, &active)), std::string("4,5,0,1"));  // rail 2, then 0
  CHECK_EQ(active, 2);
  CHECK_EQ(str(topoHopDevices(t, 2, 5, 2, false, 3, &why, &active)), std::string("4,5,0"));  // as many as fit
  CHECK_EQ(str(topoHopDevices(t, 2, 5, 2, false, 16, &why)), std::string("4,5"));  // none asked for
  CHECK_EQ(str(topoHopDevices(t, 2, 3, 2, true, 16, &why, &active)), std::string("0,2,4,1,3,5"));
  CHECK_EQ(active, 6);
  Topology one = layout(2, 1, [](int) { return std::vector<TopoNic>{nic("a", 0, "", 0, 0), nic("b", 1, "", 0, 1)}; });
  CHECK_EQ(str(topoHopDevices(one, 0, 1, 0, false, 16, &why, &active)), std::string("0,1"));
  CHECK_EQ(active, 2);
}
