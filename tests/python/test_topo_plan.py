"""`python -m accl.topo` and the plan under it (acclTopoPlan): the library's
own topology from a layout, without a job."""
import json
import subprocess
import sys

import pytest

import accl
from accl import topo

RAILS = "rails " + ",".join(f"r{r}p{p}:{r}:{p}" for r in range(4) for p in range(2))
NICS = "nics " + ",".join(f"r{r}p{p}=10.9.{2 * r + p}.0/24" for r in range(4) for p in range(2))
HPN = f"host a ranks 0,1,2,3 {NICS} {RAILS}\nhost b ranks 4,5,6,7 {NICS} {RAILS}\n"


def test_an_hpn_layout_is_planned_rail_by_rail():
    p = topo.plan(HPN)
    assert (p["rails"], p["planes"], p["hier"]) == (4, 2, True)
    assert p["ring"] == list(range(8))
    hops = {(x["from"], x["to"]): x["lanes"] for x in p["rail_hops"]}
    # each rank along its own rail, both planes: rank i of a host over rail i
    for i in range(4):
        assert hops[(i, 4 + i)] == [[f"r{i}p0", f"r{i}p0"], [f"r{i}p1", f"r{i}p1"]]
        assert hops[(4 + i, i)] == [[f"r{i}p0", f"r{i}p0"], [f"r{i}p1", f"r{i}p1"]]
    # and the next rail's ports standing by (failover), rail to rail too
    spare = {(x["from"], x["to"]): x["standby"] for x in p["rail_hops"]}
    for i in range(4):
        j = (i + 1) % 4
        assert spare[(i, 4 + i)] == [[f"r{j}p0", f"r{j}p0"], [f"r{j}p1", f"r{j}p1"]]
    ring = {(x["from"], x["to"]): x["lanes"] for x in p["ring_hops"]}
    assert set(ring) == {(3, 4), (7, 0)}
    assert sorted(a for a, b in ring[(3, 4)]) == sorted(f"r{r}p{q}" for r in range(4) for q in range(2))
    assert all(a == b for a, b in ring[(3, 4)])  # every lane joins one rail and plane
    assert len(p["trees"]) == 2 and sorted(p["trees"][0]).count(-1) == 1  # one root each


def test_nics_listed_in_another_order_still_pair_by_rail():
    other = ",".join(f"r{r}p{p}=10.9.{2 * r + p}.0/24" for r in reversed(range(4)) for p in range(2))
    p = topo.plan(f"host a ranks 0,1 {NICS} {RAILS}\nhost b ranks 2,3 nics {other} {RAILS}\n")
    for x in p["rail_hops"] + p["ring_hops"]:
        assert x["lanes"] and all(a == b for a, b in x["lanes"]), x


def test_uneven_hosts_and_interleaved_ranks():
    p = topo.plan("host a ranks 0,2,4 nics e0=10.1.0.0/24\nhost b ranks 1,3 nics e0=10.1.0.0/24\n")
    assert not p["hier"] and p["rail_hops"] == []
    assert p["ring"] == [0, 2, 4, 1, 3]  # host by host
    p = topo.plan("host a ranks 0,2 nics e0=10.1.0.0/24\nhost b ranks 1,3 nics e0=10.1.0.0/24\n")
    assert p["hier"] and {(x["from"], x["to"]) for x in p["rail_hops"]} == {(0, 1), (1, 0), (2, 3), (3, 2)}


@pytest.mark.parametrize("layout,said", [
    ("host a nics e0\n", "line 1: a host needs 'ranks R,R,...'"),
    ("host a ranks 0,1\nhost b ranks 1\n", "rank 1 (of host b) is listed twice"),
    ("host a ranks 0,2\n", "rank 2 (of host a) is past the 2 ranks listed"),
    ("hosts a ranks 0\n", "line 1: 'hosts': a line is 'host ...' or 'crossnic N'"),
    ("host a ranks 0 nics e0 rails e1:0\n", "line 1: rails e1:0: 'e1' is not a NIC of this host"),
    ("crossnic 3\n", "line 1: crossnic takes 0, 1 or 2"),
    ("", "no host"),
])
def test_bad_layouts_are_clear_errors(layout, said):
    with pytest.raises(accl.InvalidArgumentError) as e:
        topo.plan(layout)
    assert said in str(e.value), (str(e.value), said)


def test_the_command_line(tmp_path):
    layout = tmp_path / "hpn.txt"
    layout.write_text("# two hosts\n" + HPN)
    out = subprocess.run([sys.executable, "-m", "accl.topo", "--layout", str(layout), "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rails"] == 4
    out = subprocess.run([sys.executable, "-m", "accl.topo", "--layout", str(layout)], capture_output=True, text=True,
                         timeout=60)
    assert "| 0 -> 4 | r0p0>r0p0, r0p1>r0p1 (standing by: r1p0>r1p0, r1p1>r1p1) |" in out.stdout, out.stdout
    # this host, two alike: its NICs as the backend sees them
    out = subprocess.run([sys.executable, "-m", "accl.topo", "--hosts", "2", "--ranks-per-host", "2"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "ring: 0 1 2 3" in out.stdout and "# 2 hosts, 4 ranks" in out.stdout


def test_the_picture(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "plan.png"
    topo.picture(topo.plan(HPN), str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10000


DUAL = ("nics a0=10.0.0.0/24@0000:17:00.0,a1=10.0.1.0/24@0000:17:00.1,"
        "b0=10.1.0.0/24@0000:31:00.0,b1=10.1.1.0/24@0000:31:00.1")


def test_pci_addresses_make_a_nics_two_ports_its_planes():
    p = topo.plan(f"host x ranks 0,1 {DUAL}\nhost y ranks 2,3 {DUAL}\n")
    assert (p["rails"], p["planes"]) == (2, 2), p
    assert "planes from the ports" in p["source"]
    ring = {(x["from"], x["to"]): x["lanes"] for x in p["ring_hops"]}
    assert ring[(1, 2)] == [["a0", "a0"], ["b0", "b0"], ["a1", "a1"], ["b1", "b1"]]
    with pytest.raises(accl.InvalidArgumentError, match="NIC\\[=SUBNET\\]\\[@PCI\\]"):
        topo.plan("host x ranks 0 nics a0=10.0.0.0/24@\n")


def test_a_topology_file_as_the_host(tmp_path):
    xml = tmp_path / "node.xml"
    xml.write_text('<?xml version="1.0"?>\n<system version="1"><cpu numaid="0">'
                   '<pci busid="0000:17:00.0"><nic><net name="a0" subnet="10.0.0.0/24" speed="200000"/></nic></pci>'
                   '<pci busid="0000:17:00.1"><nic><net name="a1" subnet="10.0.1.0/24"/></nic></pci>'
                   '<gpu dev="0" rank="0"/></cpu></system>\n')
    assert topo.file_nics(xml.read_text()) == "nics a0=10.0.0.0/24@0000:17:00.0,a1=10.0.1.0/24@0000:17:00.1"
    out = subprocess.run([sys.executable, "-m", "accl.topo", "--topo-file", str(xml), "--json"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    p = json.loads(out.stdout)
    assert (p["rails"], p["planes"]) == (1, 2), p
    declared = '<system><nic><net name="e0" rail="1"/><net name="e1" rail="0" plane="1"/></nic></system>'
    assert topo.file_nics(declared) == "nics e0,e1 rails e0:1:0,e1:0:1"
    bad = tmp_path / "bad.xml"
    bad.write_text("<system><nic></system>")
    out = subprocess.run([sys.executable, "-m", "accl.topo", "--topo-file", str(bad)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "--topo-file" in out.stderr and "mismatched tag" in out.stderr, out.stderr
