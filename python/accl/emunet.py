"""An emulated multi-host network on one Linux machine, for tests and benchmarks.

Each host is a network namespace with its own NCCL_HOSTID. Each of its NICs
has `planes` ports; port (rail r, plane p) of every host is a veth whose
other end joins one bridge per (r, p), so traffic that stays on a rail and
plane crosses one switch, as on an HPN fabric, and each (r, p) is a subnet of
its own (10.A.B.0/24, B = r * planes + p, host h at .h+1). A port sends
only what leaves from its own address (per-port routing tables), as a NIC
does: traffic from one rail to another goes through the spine, a router
with a port on every bridge (.254), whose counters show the bytes that
crossed between rails (`spine=False`: none, and such traffic cannot be
sent). With two planes every rank is told the rails and planes
(ACCL_NICS); with one, ACCL finds the rails from the subnets. A rate (tc tbf,
both directions) gives every port a line rate; a port can be slowed or taken
down on its own. Needs root and iproute2. Everything it makes carries a tag
and goes on `down()` (or with the namespaces, however the process ends:
`python -m accl.emunet down --all` removes leftovers).

    with EmuNet(hosts=2, nics=2, rate="1gbit") as net:
        subprocess.run(net.hosts[0].cmd(["ip", "addr"]))
        net.launch(["python", "-m", "accl.perf", "allreduce"], ranks_per_host=1)

    python -m accl.emunet launch --hosts 2 --nics 2 --rate 1gbit -- python -m accl.perf allreduce -b 1M -e 64M

OpenMPI runs across the hosts too (`mpirun`, a peer for the benchmarks):
mpirun starts in host 0's namespace and reaches the others through this
module's `rsh`, which enters the namespace that holds the address it is
given, so every rank, daemon and connection lives on the emulated network.

    python -m accl.emunet mpirun --hosts 2 -- --mca btl tcp,self mpi_coll allreduce 8 64M
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

PREFIX = "accl"  # of every namespace and bridge name this module makes


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


def _tc(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["tc", *args], check=check, capture_output=True, text=True, timeout=30)


def _shape(dev: str, rate: str | None, ns: str | None = None) -> None:
    """A token bucket of `rate` on dev's egress (None: unshaped)."""
    where = ["-n", ns] if ns else []
    _tc(*where, "qdisc", "del", "dev", dev, "root", check=False)
    if rate:
        # A burst of about 1 ms at the rate (at least 64 KiB, for TSO-sized segments).
        bits = _rate_bits(rate)
        burst = max(64 << 10, bits // 8 // 1000)
        _tc(*where, "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", str(burst), "latency", "20ms")


def _rate_bits(rate: str) -> int:
    """Bits per second of a tc rate ("1gbit", "500mbit", "100kbit", "1000000")."""
    r = rate.strip().lower()
    for suffix, scale in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3), ("bit", 1)):
        if r.endswith(suffix):
            return int(float(r[:-len(suffix)]) * scale)
    return int(r)


def _link_bytes(ns: str, names: set[str]) -> dict[str, tuple[int, int]]:
    """{ifname: (tx bytes, rx bytes)} of those interfaces of namespace ns."""
    out = json.loads(_ip("-n", ns, "-s", "-j", "link", "show").stdout)
    return {d["ifname"]: (d["stats64"]["tx"]["bytes"], d["stats64"]["rx"]["bytes"])
            for d in out if d["ifname"] in names}


@dataclass
class Port:
    rail: int
    plane: int
    ifname: str  # inside the host's namespace: nic<rail>p<plane>
    addr: str    # its IPv4 address
    outside: str  # the veth's other end, on the bridge


@dataclass
class Host:
    index: int
    ns: str
    ports: list[Port] = field(default_factory=list)

    def env(self, base: dict | None = None) -> dict:
        """An environment for a rank on this host: its host id and every port as
        the socket interfaces (exact names); with two planes, their rails and
        planes (ACCL_NICS)."""
        env = dict(os.environ if base is None else base)
        env["NCCL_HOSTID"] = self.ns
        env["NCCL_SOCKET_IFNAME"] = "=" + ",".join(p.ifname for p in self.ports)
        if any(p.plane for p in self.ports):
            env["ACCL_NICS"] = ",".join(f"{p.ifname}:{p.rail}:{p.plane}" for p in self.ports)
        return env

    def cmd(self, argv: list[str]) -> list[str]:
        """argv run inside this host's namespace."""
        return ["ip", "netns", "exec", self.ns, *argv]

    def counters(self) -> dict[str, tuple[int, int]]:
        """{ifname: (tx bytes, rx bytes)} of this host's ports."""
        return _link_bytes(self.ns, {p.ifname for p in self.ports})


class EmuNet:
    """hosts x nics x planes ports; see the module's description."""

    def __init__(self, hosts: int = 2, nics: int = 1, planes: int = 1, rate: str | None = None,
                 tag: str | None = None, spine: bool = True):
        if not 1 <= hosts <= 200 or not 1 <= nics <= 16 or not 1 <= planes <= 2:
            raise ValueError("hosts 1-200, nics 1-16, planes 1-2")
        if rate is not None:
            _rate_bits(rate)  # a ValueError now, not from tc later
        self.tag = tag or secrets.token_hex(2)
        if not re.fullmatch(r"[0-9a-f]{4}", self.tag):
            raise ValueError(f"tag {self.tag!r}: four hex digits")
        self.nhosts, self.nics, self.planes, self.rate = hosts, nics, planes, rate
        net = 64 + int(self.tag, 16) % 128  # 10.64-191.x.x: one /16 per emulated network
        self.net = f"10.{net}.0.0/16"
        self.spine = f"{PREFIX}{self.tag}sp" if spine else None
        self.spine_ports = [(f"av{self.tag}sn{r}p{p}", f"r{r}p{p}", f"10.{net}.{r * planes + p}.254")
                            for r in range(nics) for p in range(planes)] if spine else []
        self.hosts = [Host(h, f"{PREFIX}{self.tag}h{h}") for h in range(hosts)]
        for host in self.hosts:
            for r in range(nics):
                for p in range(planes):
                    host.ports.append(Port(r, p, f"nic{r}p{p}", f"10.{net}.{r * planes + p}.{host.index + 1}",
                                           f"av{self.tag}h{host.index}n{r}p{p}"))
        self.bridges = [f"ab{self.tag}n{r}p{p}" for r in range(nics) for p in range(planes)]
        self._up = False

    def up(self) -> "EmuNet":
        if not shutil.which("ip") or not shutil.which("tc"):
            raise RuntimeError("the emulated network needs iproute2 (ip, tc)")
        if os.geteuid() != 0:
            raise RuntimeError("the emulated network needs root (network namespaces)")
        self._up = True  # from here, down() removes what exists
        try:
            for br in self.bridges:
                _ip("link", "add", br, "type", "bridge")
                _ip("link", "set", br, "up")
            if self.spine:
                self._namespace(self.spine, forward=True)
                for (outside, inside, addr), br in zip(self.spine_ports, self.bridges):
                    _ip("link", "add", outside, "type", "veth", "peer", "name", inside, "netns", self.spine)
                    _ip("link", "set", outside, "master", br)
                    _ip("link", "set", outside, "up")
                    _ip("-n", self.spine, "addr", "add", f"{addr}/24", "dev", inside)
                    _ip("-n", self.spine, "link", "set", inside, "up")
            for host in self.hosts:
                self._namespace(host.ns)
                for i, p in enumerate(host.ports):
                    _ip("link", "add", p.outside, "type", "veth", "peer", "name", p.ifname, "netns", host.ns)
                    _ip("link", "set", p.outside, "master", f"ab{self.tag}n{p.rail}p{p.plane}")
                    _ip("link", "set", p.outside, "up")
                    _ip("-n", host.ns, "addr", "add", f"{p.addr}/24", "dev", p.ifname)
                    _ip("-n", host.ns, "link", "set", p.ifname, "up")
                    self._route_from(host, p, 100 + i)
                    self._shape_port(host, p, self.rate)
        except (subprocess.CalledProcessError, OSError) as e:
            why = e.stderr.strip() if isinstance(e, subprocess.CalledProcessError) else str(e)
            self.down()
            raise RuntimeError(f"cannot make the emulated network: {why}") from None
        return self

    @staticmethod
    def _namespace(ns: str, forward: bool = False) -> None:
        """A namespace with loopback up; replies may come in on another port
        than the one a connection left from (no reverse-path filter)."""
        _ip("netns", "add", ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        knobs = {"conf/all/rp_filter": 0, "conf/default/rp_filter": 0, **({"ip_forward": 1} if forward else {})}
        script = "; ".join(f"echo {v} > /proc/sys/net/ipv4/{k}" for k, v in knobs.items())
        subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", script], check=True, capture_output=True, text=True,
                       timeout=30)

    def _route_from(self, host: Host, p: Port, table: int) -> None:
        """What leaves from p's address leaves through p: its subnet directly,
        the other rails' through the spine (or nowhere without one)."""
        subnet = p.addr.rsplit(".", 1)[0] + ".0/24"
        _ip("-n", host.ns, "rule", "add", "from", p.addr, "lookup", str(table), "priority", str(table))
        _ip("-n", host.ns, "route", "add", subnet, "dev", p.ifname, "src", p.addr, "table", str(table))
        if self.spine:
            _ip("-n", host.ns, "route", "add", self.net, "via", subnet.rsplit(".", 1)[0] + ".254", "dev", p.ifname,
                "table", str(table))
        else:
            _ip("-n", host.ns, "route", "add", "unreachable", self.net, "table", str(table))

    def spine_bytes(self) -> int:
        """Bytes the spine forwarded between rails (what its ports sent); 0 without one."""
        if not self.spine:
            return 0
        return sum(tx for tx, _ in _link_bytes(self.spine, {i for _, i, _ in self.spine_ports}).values())

    def down(self) -> None:
        """Removes the namespaces (and with them their veths) and the bridges."""
        if not self._up:
            return
        if self.spine:
            _ip("netns", "del", self.spine, check=False)
        for host in self.hosts:
            _ip("netns", "del", host.ns, check=False)
        for br in self.bridges:
            _ip("link", "del", br, check=False)
        self._up = False

    def __enter__(self) -> "EmuNet":
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()

    def port(self, host: int, rail: int, plane: int = 0) -> Port:
        return next(p for p in self.hosts[host].ports if p.rail == rail and p.plane == plane)

    def _shape_port(self, host: Host, p: Port, rate: str | None) -> None:
        _shape(p.ifname, rate, host.ns)  # what the host sends
        _shape(p.outside, rate)          # what it receives

    def set_rate(self, host: int, rail: int, plane: int, rate: str | None) -> None:
        """One port at another rate (None: unshaped)."""
        self._shape_port(self.hosts[host], self.port(host, rail, plane), rate)

    def set_link(self, host: int, rail: int, plane: int, up: bool) -> None:
        """Takes one port down (a failed link) or up again; back up, it carries
        traffic when this returns: its carrier is there (3 s at most), and no
        host remembers its address as unreachable from while it was down."""
        ns, ifname = self.hosts[host].ns, self.port(host, rail, plane).ifname
        _ip("-n", ns, "link", "set", ifname, "up" if up else "down")
        if not up:
            return
        until = time.monotonic() + 3
        while time.monotonic() < until:
            link = json.loads(_ip("-n", ns, "-j", "link", "show", ifname).stdout)[0]
            if "LOWER_UP" in link.get("flags", []):
                break
            time.sleep(0.02)
        for h in self.hosts:  # failed neighbour entries would refuse connections for a while
            _ip("-n", h.ns, "neigh", "flush", "dev", self.port(h.index, rail, plane).ifname, check=False)

    def describe(self) -> dict:
        return {"tag": self.tag, "rate": self.rate, "bridges": self.bridges, "spine": self.spine,
                "hosts": [{"ns": h.ns, "ports": [vars(p) for p in h.ports]} for h in self.hosts]}

    def launch(self, argv: list[str], ranks_per_host: int = 1, timeout: float = 600,
               env: dict | None = None) -> list[subprocess.CompletedProcess]:
        """Runs argv as hosts x ranks_per_host ranks, rank r on host r // ranks_per_host,
        with what an MPI-style launcher gives (PMI_RANK, PMI_SIZE) and a rendezvous
        on host 0's first port (NCCL_COMM_ID, with a fresh ACCL_SECRET). Returns each
        rank's result (stdout and stderr together); a rank past `timeout` is killed."""
        n = self.nhosts * ranks_per_host
        port = 20000 + secrets.randbelow(20000)
        common = {"NCCL_COMM_ID": f"{self.hosts[0].ports[0].addr}:{port}", "ACCL_SECRET": secrets.token_hex(16),
                  "PMI_SIZE": str(n)}
        procs = []
        for r in range(n):
            host = self.hosts[r // ranks_per_host]
            e = host.env(env)
            e.update(common, PMI_RANK=str(r))
            procs.append(subprocess.Popen(host.cmd(argv), env=e, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        results = []
        for r, p in enumerate(procs):
            try:
                out, _ = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                out, _ = p.communicate()
                out += f"\n[emunet: rank {r} killed after {timeout:.0f} s]\n"
            results.append(subprocess.CompletedProcess(p.args, p.returncode, out, None))
        return results


    def mpirun(self, args: list[str], ranks_per_host: int = 1, timeout: float = 600,
               env: dict | None = None) -> subprocess.CompletedProcess:
        """OpenMPI's mpirun with `args` (its options, then the program), run in
        host 0's namespace over a hostfile of every host's first port
        (ranks_per_host slots each, filled in order: rank r on host
        r // ranks_per_host); the daemons reach each other, and the TCP BTL
        each rank, through the emulated ports only. stdout and stderr
        together; past `timeout` it is killed."""
        mpirun = shutil.which("mpirun")
        if not mpirun:
            raise RuntimeError("mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)")
        ifs = ",".join(sorted({p.ifname for p in self.hosts[0].ports}))
        with tempfile.TemporaryDirectory(prefix="emunet-mpi-") as tmp:
            hostfile = os.path.join(tmp, "hosts")
            with open(hostfile, "w") as f:
                f.writelines(f"{h.ports[0].addr} slots={ranks_per_host}\n" for h in self.hosts)
            argv = self.hosts[0].cmd([
                mpirun, "--allow-run-as-root", "--hostfile", hostfile, "-np", str(self.nhosts * ranks_per_host),
                "--mca", "plm_rsh_agent", f"{sys.executable} -m accl.emunet rsh",
                "--mca", "oob_tcp_if_include", self.hosts[0].ports[0].ifname,
                "--mca", "btl_tcp_if_include", ifs, *args])
            try:
                r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   timeout=timeout)
            except subprocess.TimeoutExpired as e:
                out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
                return subprocess.CompletedProcess(argv, 124, out + f"\n[emunet: mpirun killed after {timeout:.0f} s]\n")
        return r

    def streams(self, src: int = 0, dst: int = 1, per_port: int = 1, seconds: float = 3.0,
                both: bool = False) -> dict[str, float]:
        """What plain TCP streams move from host src to host dst (and back at
        the same time where `both`, as a collective's traffic goes): per_port
        streams on every port, each a process at both ends, writing 1 MiB at a
        time for `seconds`. The wire's reference for a benchmark. Returns
        {"<ifname> <from>-><to>": MB/s received}."""
        port0 = 30000 + secrets.randbelow(20000)
        ways = [(src, dst), (dst, src)] if both else [(src, dst)]
        flows = [(a, b, p, port0 + len(ways) * i + w) for w, (a, b) in enumerate(ways)
                 for i, p in enumerate(q for q in self.hosts[b].ports for _ in range(per_port))]
        receivers = [subprocess.Popen(self.hosts[b].cmd([sys.executable, "-c", _STREAM_RECV, p.addr, str(port)]),
                                      stdout=subprocess.PIPE, text=True) for a, b, p, port in flows]
        try:
            for r in receivers:
                if r.stdout.readline().strip() != "ready":
                    raise RuntimeError("a stream receiver did not start")
            senders = [subprocess.Popen(self.hosts[a].cmd([sys.executable, "-c", _STREAM_SEND, p.addr, str(port),
                                                           str(seconds)])) for a, b, p, port in flows]
            for s in senders:
                s.wait(timeout=seconds + 30)
            rates: dict[str, float] = {}
            for (a, b, p, _), r in zip(flows, receivers):
                out, _ = r.communicate(timeout=30)
                key = f"{p.ifname} {a}->{b}"
                rates[key] = rates.get(key, 0.0) + float(out.split()[0])
            return rates
        finally:
            for r in receivers:
                r.kill()
                r.wait()


# One stream's ends: the receiver prints "ready", then the MB/s it received
# from its first byte to the end; the sender writes 1 MiB at a time for N s.
_STREAM_RECV = ("import socket, sys, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                "s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(); print('ready', flush=True); c, _ = s.accept(); "
                "b = bytearray(1 << 20); n = c.recv_into(b); t = time.monotonic(); tot = n\n"
                "while n: n = c.recv_into(b); tot += n\n"
                "print(tot / max(time.monotonic() - t, 1e-9) / 1e6)")
_STREAM_SEND = ("import socket, sys, time; c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10); "
                "b = bytes(1 << 20); end = time.monotonic() + float(sys.argv[3])\n"
                "while time.monotonic() < end: c.sendall(b)\n"
                "c.close()")

def remove_all(tag: str | None = None) -> list[str]:
    """Removes the namespaces and bridges of the emulated network `tag`, or of
    every one this module made (in any process)."""
    t = re.escape(tag) if tag else "[0-9a-f]{4}"
    gone = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = (line.split() or [""])[0]
        if re.fullmatch(rf"{PREFIX}{t}(h\d+|sp)", name):
            _ip("netns", "del", name, check=False)
            gone.append(name)
    for d in json.loads(_ip("-j", "link", "show", "type", "bridge", check=False).stdout or "[]"):
        if re.fullmatch(rf"ab{t}n\d+p\d", d["ifname"]):
            _ip("link", "del", d["ifname"], check=False)
            gone.append(d["ifname"])
    return gone


def rsh(address: str, command: list[str]) -> int:
    """mpirun's remote shell here: runs `command` (words joined, as ssh does)
    in the emulated host that holds `address`; does not return on success."""
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        ns = (line.split() or [""])[0]
        if not re.fullmatch(rf"{PREFIX}[0-9a-f]{{4}}h\d+", ns):
            continue
        addrs = json.loads(_ip("-n", ns, "-j", "addr", "show", check=False).stdout or "[]")
        if any(a.get("local") == address for d in addrs for a in d.get("addr_info", [])):
            os.execvp("ip", ["ip", "netns", "exec", ns, "sh", "-c", " ".join(command)])
    print(f"accl.emunet rsh: no emulated host holds {address}", file=sys.stderr)
    return 255


def _print_counters(net: EmuNet) -> None:
    """Every host's ports' byte counters, one comment line a host."""
    for h in net.hosts:
        print(f"# {h.ns}: " + ", ".join(f"{name} tx {tx} rx {rx} bytes"
                                       for name, (tx, rx) in sorted(h.counters().items())))
    if net.spine:
        print(f"# spine: {net.spine_bytes()} bytes forwarded between rails")


def _port_rate(spec: str, net: EmuNet) -> tuple[int, int, str]:
    """(rail, plane, rate) of a --port-rate RAIL[:PLANE]=RATE; a ValueError where it names no port."""
    m = re.fullmatch(r"(\d+)(?::(\d+))?=(\S+)", spec)
    if not m:
        raise ValueError(f"--port-rate {spec!r}: RAIL[:PLANE]=RATE, e.g. 3=500mbit")
    rail, plane, rate = int(m[1]), int(m[2] or 0), m[3]
    if rail >= net.nics or plane >= net.planes:
        raise ValueError(f"--port-rate {spec!r}: there are {net.nics} rail(s) of {net.planes} plane(s)")
    _rate_bits(rate)
    return rail, plane, rate


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m accl.emunet", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="verb", required=True)
    for verb in ("up", "launch", "mpirun", "streams"):
        s = sub.add_parser(verb)
        s.add_argument("--hosts", type=int, default=2)
        s.add_argument("--nics", type=int, default=1)
        s.add_argument("--planes", type=int, default=1)
        s.add_argument("--rate", default=None, help="every port's rate, as tc writes it (1gbit, 500mbit)")
        s.add_argument("--port-rate", action="append", default=[], metavar="RAIL[:PLANE]=RATE",
                       help="that port of every host at another rate (repeatable): 3=500mbit, 0:1=100mbit")
        s.add_argument("--no-spine", action="store_true",
                       help="no router between rails: traffic from one rail to another cannot be sent")
        if verb == "streams":
            s.add_argument("--per-port", type=int, default=1, help="streams on each port (1)")
            s.add_argument("--seconds", type=float, default=3.0)
            s.add_argument("--both", action="store_true", help="both ways at once (as a collective's traffic)")
        if verb in ("launch", "mpirun"):
            s.add_argument("--ranks-per-host", type=int, default=1)
            s.add_argument("--timeout", type=float, default=600)
            s.add_argument("cmd", nargs=argparse.REMAINDER,
                           help="-- the program and its arguments" if verb == "launch"
                           else "-- mpirun's options, then the program and its arguments")
    r = sub.add_parser("rsh", help="mpirun's remote shell (plm_rsh_agent): ADDRESS COMMAND...")
    r.add_argument("address")
    r.add_argument("command", nargs=argparse.REMAINDER)
    d = sub.add_parser("down")
    d.add_argument("--all", action="store_true", help="every emulated network on this machine")
    d.add_argument("--tag")
    a = p.parse_args(argv)
    if a.verb == "rsh":
        return rsh(a.address, a.command)
    try:
        if a.verb == "down":
            if not a.all and not a.tag:
                p.error("down needs --all or --tag")
            print(" ".join(remove_all(None if a.all else a.tag)) or "nothing to remove")
            return 0
        net = EmuNet(a.hosts, a.nics, a.planes, a.rate, spine=not a.no_spine)
        ports = [_port_rate(spec, net) for spec in a.port_rate]

        def set_port_rates() -> None:  # once the network is up: --port-rate on every host
            for rail, plane, rate in ports:
                for h in range(net.nhosts):
                    net.set_rate(h, rail, plane, rate)
        if a.verb == "up":
            net.up()
            set_port_rates()
            print(json.dumps(net.describe(), indent=1))
            return 0
        if a.verb == "streams":
            if a.hosts < 2:
                p.error("streams needs 2 hosts or more")
            with net:
                set_port_rates()
                rates = net.streams(0, 1, a.per_port, a.seconds, a.both)
            for name, mbs in sorted(rates.items()):
                print(f"{name}: {mbs:.1f} MB/s")
            way = sum(v for k, v in rates.items() if k.endswith("0->1"))
            print(f"host 0 to host 1: {way:.1f} MB/s in all ({a.per_port} stream(s) per port"
                  + (", both ways at once)" if a.both else ")"))
            return 0
        cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
        if not cmd:
            p.error(f"{a.verb} needs a program: ... {a.verb} -- python -m accl.perf allreduce")
        if a.verb == "mpirun":
            with net:
                set_port_rates()
                res = net.mpirun(cmd, a.ranks_per_host, a.timeout)
                sys.stdout.write(res.stdout)
                _print_counters(net)
            return res.returncode
        with net:
            set_port_rates()
            results = net.launch(cmd, a.ranks_per_host, a.timeout)
            for r, res in enumerate(results):
                if r == 0 or res.returncode != 0:
                    sys.stdout.write(res.stdout if r == 0 else f"--- rank {r} (exit {res.returncode}) ---\n"
                                     + res.stdout[-4000:])
            _print_counters(net)
            return max(res.returncode for res in results)
    except (RuntimeError, ValueError) as e:
        print(f"accl.emunet: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
