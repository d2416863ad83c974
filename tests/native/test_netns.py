"""Real "hosts" on one machine (accl.emunet): network namespaces, one veth
per NIC port into a bridge per (rail, plane). The tool itself (rails stay
apart, ports go down and up, nothing is left behind), and ranks across it:
ranks on one host use shared memory, the ring crosses hosts over TCP
(NCCL_SOCKET_IFNAME names each host's ports)."""
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest

from accl.emunet import EmuNet, _port_rate, remove_all

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"),
                                reason="needs root and iproute2 for network namespaces")

# A TCP exchange between two hosts: the server echoes one line.
SERVE = ("import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
         "s.bind((sys.argv[1], 29877)); s.listen(); print('ready', flush=True); c, _ = s.accept(); "
         "c.sendall(c.recv(64))")
ASK = ("import socket, sys; c = socket.create_connection((sys.argv[1], 29877), timeout=3); "
       "c.sendall(b'hello'); print(c.recv(64).decode())")


def reachable(net, src, dst, rail, plane=0):
    """Whether host src reaches host dst's port (rail, plane) over TCP."""
    addr = net.port(dst, rail, plane).addr
    server = subprocess.Popen(net.hosts[dst].cmd([sys.executable, "-c", SERVE, addr]), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready", server.stderr.read()
        ask = subprocess.run(net.hosts[src].cmd([sys.executable, "-c", ASK, addr]), capture_output=True, text=True,
                             timeout=10)
        return ask.returncode == 0 and ask.stdout.strip() == "hello"
    finally:
        server.kill()
        server.wait()


def emunet(**kw):
    try:
        return EmuNet(**kw).up()
    except RuntimeError as e:
        pytest.skip(str(e))


@pytest.mark.timeout(120)
def test_emulated_network_keeps_rails_apart_and_cleans_up():
    net = emunet(hosts=2, nics=2, planes=2, rate="1gbit")
    try:
        for h in net.hosts:
            assert [(p.rail, p.plane, p.ifname) for p in h.ports] == [
                (0, 0, "nic0p0"), (0, 1, "nic0p1"), (1, 0, "nic1p0"), (1, 1, "nic1p1")]
        assert reachable(net, 0, 1, rail=1, plane=1)
        # Each (rail, plane) is a subnet and a switch of its own: host 0's
        # plane-0 port cannot reach host 1's plane-1 address on its subnet.
        assert net.port(0, 0, 0).addr.rsplit(".", 2)[1] != net.port(1, 0, 1).addr.rsplit(".", 2)[1]
        qdiscs = subprocess.run(["tc", "-n", net.hosts[0].ns, "qdisc", "show"], capture_output=True, text=True).stdout
        assert qdiscs.count("tbf") == 4 and "rate 1Gbit" in qdiscs, qdiscs
        net.set_rate(0, 1, 0, "500mbit")
        qdiscs = subprocess.run(["tc", "-n", net.hosts[0].ns, "qdisc", "show", "dev", "nic1p0"], capture_output=True,
                                text=True).stdout
        assert "rate 500Mbit" in qdiscs, qdiscs
        net.set_link(1, 0, 0, up=False)
        assert not reachable(net, 0, 1, rail=0)
        net.set_link(1, 0, 0, up=True)
        assert reachable(net, 0, 1, rail=0)
    finally:
        net.down()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert net.tag not in names and net.tag not in links
    assert remove_all(net.tag) == []


def test_emulated_network_refuses_bad_shapes():
    for kw in ({"hosts": 0}, {"nics": 17}, {"planes": 3}, {"rate": "fast"}, {"tag": "xyz!"}):
        with pytest.raises(ValueError):
            EmuNet(**kw)
    net = EmuNet(hosts=2, nics=4, planes=2)
    assert _port_rate("3=500mbit", net) == (3, 0, "500mbit")
    assert _port_rate("0:1=100mbit", net) == (0, 1, "100mbit")
    for spec in ("4=1gbit", "0:2=1gbit", "x", "1=fast"):
        with pytest.raises(ValueError):
            _port_rate(spec, net)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nics", [1, 2])
def test_allreduce_across_two_emulated_hosts(c_program, nics):
    net = emunet(hosts=2, nics=nics)
    try:
        results = net.launch([str(c_program("rank_worker")), "pmi", "pmi", "1000003", "5"], ranks_per_host=2,
                             timeout=90, env={**os.environ, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT"})
        for rank, res in enumerate(results):
            assert res.returncode == 0, res.stdout[-3000:]
            assert f"rank {rank}: done" in res.stdout
        # Within a host: shared memory; across hosts: sockets.
        assert "rank 0 -> rank 1 via shm" in results[0].stdout
        assert "rank 1 -> rank 2 via net" in results[1].stdout
        assert "rank 3 -> rank 0 via net" in results[3].stdout
        sent = sum(tx for h in net.hosts for tx, _ in h.counters().values())
        assert sent > 2 * 1000003 * 4  # the ring's data crossed the emulated ports
    finally:
        net.down()


def _tx_by_port(net, before):
    """{host: {ifname: bytes sent since `before`}}."""
    return {h.index: {k: v[0] - before[h.index][k][0] for k, v in h.counters().items()} for h in net.hosts}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("lanes", [None, (2, 3)], ids=["one-socket-per-nic", "2x3-sockets"])
def test_one_rank_per_host_fills_every_nic(c_program, lanes):
    """One rank per host with two NICs merges them into one device: each
    connection's sockets leave from both NICs, and each NIC, the bottleneck at
    300 Mbit/s, carries about half of the data (before, the second NIC
    carried a few hundred bytes). (Unshaped, the CPU is the bottleneck and
    the split follows the threads' timing.)"""
    net = emunet(hosts=2, nics=2, rate="300mbit")
    try:
        env = {**os.environ, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "NET"}
        if lanes:
            env.update(NCCL_SOCKET_NTHREADS=str(lanes[0]), NCCL_NSOCKS_PERTHREAD=str(lanes[1]))
        before = {h.index: h.counters() for h in net.hosts}
        results = net.launch([str(c_program("rank_worker")), "pmi", "pmi", str(1 << 21), "3"], timeout=150, env=env)
        for rank, res in enumerate(results):
            assert res.returncode == 0, res.stdout[-3000:]
            assert f"rank {rank}: done" in res.stdout
            sockets = lanes[0] * lanes[1] if lanes else 2
            assert f"a send connection of {sockets} sockets (" in res.stdout, res.stdout[-3000:]
        for host, ports in _tx_by_port(net, before).items():
            total = sum(ports.values())
            assert total > 3 * (1 << 21) * 4, ports  # every iteration's data crossed
            for name, tx in ports.items():
                assert tx > 0.35 * total, (host, ports)
    finally:
        net.down()


@pytest.mark.timeout(240)
def test_one_rank_per_host_fills_eight_nics(c_program):
    """An HPN host's NIC count: one rank per host, eight NICs merged into one
    device (the handle carries up to 16 IPv4 addresses), a socket from each;
    every NIC, the bottleneck at 100 Mbit/s, carries a share."""
    net = emunet(hosts=2, nics=8, rate="100mbit")
    try:
        env = {**os.environ, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "NET"}
        before = {h.index: h.counters() for h in net.hosts}
        results = net.launch([str(c_program("rank_worker")), "pmi", "pmi", str(1 << 21), "2"], timeout=200, env=env)
        for rank, res in enumerate(results):
            assert res.returncode == 0, res.stdout[-3000:]
            assert f"rank {rank}: done" in res.stdout
            assert "a send connection of 8 sockets (" in res.stdout, res.stdout[-3000:]
        for host, ports in _tx_by_port(net, before).items():
            total = sum(ports.values())
            assert len(ports) == 8 and total > 2 * (1 << 21) * 4, ports
            for name, tx in ports.items():
                assert tx > 0.06 * total, (host, ports)  # an eighth is 0.125
    finally:
        net.down()


@pytest.mark.timeout(180)
def test_a_slow_port_carries_less(c_program):
    """Each chunk goes to a socket that has room for it: a port at a tenth of
    the other's rate drains its socket slowly and takes fewer chunks, where an
    even split would give it half of them and hold every call to its pace."""
    net = emunet(hosts=2, nics=2, rate="1gbit")
    try:
        for h in range(2):
            net.set_rate(h, 1, 0, "100mbit")
        before = {h.index: h.counters() for h in net.hosts}
        results = net.launch([str(c_program("rank_worker")), "pmi", "pmi", str(1 << 22), "2"], timeout=150)
        for rank, res in enumerate(results):
            assert res.returncode == 0, res.stdout[-3000:]
        for host, ports in _tx_by_port(net, before).items():
            assert ports["nic1p0"] < 0.3 * sum(ports.values()), (host, ports)
    finally:
        net.down()


@pytest.mark.timeout(60)
def test_streams_measure_the_shaped_wire():
    """The wire's reference (EmuNet.streams): plain TCP streams over a port
    shaped to 100 Mbit/s move at most its 12.5 MB/s, and most of that."""
    net = emunet(hosts=2, nics=2, rate="100mbit")
    try:
        rates = net.streams(0, 1, per_port=1, seconds=1.5, both=True)
        assert sorted(rates) == ["nic0p0 0->1", "nic0p0 1->0", "nic1p0 0->1", "nic1p0 1->0"]
        for key, mbs in rates.items():
            assert 6 < mbs < 13, rates
    finally:
        net.down()


# Each rank: where it runs, and an MPI allreduce of 1 MiB of int64 (rank + i).
MPI_RANK = ("import os, subprocess, numpy as np; from mpi4py import MPI; c = MPI.COMM_WORLD; "
            "a = np.arange(1 << 17, dtype=np.int64) + c.rank; b = np.empty_like(a); c.Allreduce(a, b); "
            "ref = sum(np.arange(1 << 17, dtype=np.int64) + r for r in range(c.size)); "
            "ns = subprocess.run(['ip', 'netns', 'identify', str(os.getpid())], capture_output=True, text=True); "
            # Each rank's line reaches rank 0, which prints them in one write: mpirun
            # forwards each rank's output in pieces that may interleave.
            "got = c.gather(f'rank {c.rank} {ns.stdout.strip()} {bool((b == ref).all())}', root=0); "
            "c.rank == 0 and print('\\n'.join(got), flush=True)")


@pytest.mark.timeout(120)
def test_mpirun_runs_each_rank_on_its_emulated_host():
    """OpenMPI as the benchmarks' peer across hosts (EmuNet.mpirun): one rank
    in each host's namespace, its TCP BTL over the emulated port (the bytes
    of the allreduce on the port's counters), the result exact."""
    pytest.importorskip("mpi4py")
    if not shutil.which("mpirun"):
        pytest.skip("no mpirun")
    net = emunet(hosts=2, nics=1)
    try:
        before = net.hosts[0].counters()["nic0p0"][0]
        res = net.mpirun(["--mca", "btl", "tcp,self", "--mca", "mpi_yield_when_idle", "1",
                          sys.executable, "-c", MPI_RANK], timeout=100)
        assert res.returncode == 0, res.stdout[-3000:]
        lines = sorted(line for line in res.stdout.splitlines() if line.startswith("rank "))
        assert lines == [f"rank 0 {net.hosts[0].ns} True", f"rank 1 {net.hosts[1].ns} True"], res.stdout[-3000:]
        assert net.hosts[0].counters()["nic0p0"][0] - before > (1 << 20) // 2  # the exchange crossed the port
    finally:
        net.down()


CROSS_RAIL = ("import socket, sys; c = socket.socket(); c.bind((sys.argv[1], 0)); c.settimeout(3); "
              "c.connect((sys.argv[2], 29877)); c.sendall(b'x' * 100000 + b'hello'); c.shutdown(socket.SHUT_WR); "
              "print(c.recv(64).decode())")
SINK = ("import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
        "s.bind((sys.argv[1], 29877)); s.listen(); print('ready', flush=True); c, _ = s.accept(); n = 0\n"
        "while (b := c.recv(65536)): n += len(b)\n"
        "c.sendall(b'got %d' % n)")


def _cross_rail_send(net, spine_ok):
    """Host 0 sends 100 KB from its rail-1 port to host 1's rail-0 port."""
    dst = net.port(1, 0).addr
    sink = subprocess.Popen(net.hosts[1].cmd([sys.executable, "-c", SINK, dst]), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert sink.stdout.readline().strip() == "ready", sink.stderr.read()
        before = net.spine_bytes()
        res = subprocess.run(net.hosts[0].cmd([sys.executable, "-c", CROSS_RAIL, net.port(0, 1).addr, dst]),
                             capture_output=True, text=True, timeout=20)
        if spine_ok:
            assert res.returncode == 0 and res.stdout.strip() == "got 100005", res.stderr
            assert net.spine_bytes() - before > 100000  # it crossed the spine, which counted it
        else:
            assert res.returncode != 0, res.stdout  # no route from rail 1 to rail 0
    finally:
        sink.kill()
        sink.wait()


@pytest.mark.timeout(120)
def test_a_port_sends_only_from_its_own_address():
    """Per-port routing, as NICs do: bytes bound to a rail-1 address leave
    through the rail-1 port, so reaching rail 0 goes through the spine (and
    its counters), or, without a spine, nowhere."""
    tags = []
    for spine in (True, False):
        net = emunet(hosts=2, nics=2, spine=spine)
        tags.append(net.tag)
        try:
            _cross_rail_send(net, spine)
            assert reachable(net, 0, 1, rail=1)  # on its own rail, directly
        finally:
            net.down()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    for tag in tags:  # the hosts, the spine, the bridges and every veth gone
        assert tag not in names and tag not in links


@pytest.mark.timeout(420)
@pytest.mark.parametrize("spine", [True, False], ids=["spine", "no-spine"])
def test_connections_between_hosts_stay_on_their_rail(spine):
    """2 hosts x 2 ranks x 2 rails: the ring's hop between hosts leaves the
    last rank of a host (whose own rail is 1) and reaches the first of the
    next (rail 0); point-to-point connections join ranks of either rail.
    Each connection takes NICs of one rail on both sides (topo/), so with a
    spine it forwards (almost) nothing, and without one everything still
    arrives. Every result exact; both NICs of each host carry data."""
    net = emunet(hosts=2, nics=2, spine=spine)
    try:
        before = {h.index: h.counters() for h in net.hosts}
        crossed = net.spine_bytes()
        env = {**os.environ, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT"}
        for coll in ("allreduce", "allgather", "alltoall", "sendrecv"):
            results = net.launch([sys.executable, "-m", "accl.perf", coll, "-b", "64K", "-e", "4M", "-f", "8",
                                  "-n", "2", "-w", "1", "-c", "1", "-d", "int32"], ranks_per_host=2, timeout=180,
                                 env=env)
            out = results[0].stdout
            assert all(r.returncode == 0 for r in results), "\n".join(r.stdout[-3000:] for r in results)
            assert "# Out of bounds values : 0 OK" in out, out[-3000:]
        assert "topology: 2 hosts, 2 rail(s) x 1 plane(s), rails from subnets" in out, out[-3000:]
        assert net.spine_bytes() - crossed < 1 << 20
        for host, ports in _tx_by_port(net, before).items():
            assert min(ports.values()) > 4 << 20, (host, ports)
    finally:
        net.down()


@pytest.mark.timeout(300)
def test_two_planes_declared_and_all_four_ports_used():
    """2 rails x 2 planes, declared to ACCL (ACCL_NICS, as EmuNet does with
    two planes): one rank per host, its ring hop over all four ports, lane j
    joining the same rail and plane on both hosts. Shaped ports: unshaped,
    a lane's share follows who gets the 2 cores, and one port took 9% once
    under CI's load."""
    net = emunet(hosts=2, nics=2, planes=2, rate="1gbit")
    try:
        before = {h.index: h.counters() for h in net.hosts}
        env = {**os.environ, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT"}
        results = net.launch([sys.executable, "-m", "accl.perf", "allreduce", "-b", "16M", "-e", "16M", "-n", "2",
                              "-w", "1", "-c", "1", "-d", "int32"], timeout=180, env=env)
        out = results[0].stdout
        assert all(r.returncode == 0 for r in results), "\n".join(r.stdout[-3000:] for r in results)
        assert "# Out of bounds values : 0 OK" in out, out[-3000:]
        assert "2 rail(s) x 2 plane(s), rails from declared" in out, out[-3000:]
        assert "nic0p1 rail 0 plane 1" in out, out[-3000:]
        assert net.spine_bytes() < 1 << 20
        for host, ports in _tx_by_port(net, before).items():
            assert sorted(ports) == ["nic0p0", "nic0p1", "nic1p0", "nic1p1"]
            assert min(ports.values()) > 0.1 * sum(ports.values()), (host, ports)
    finally:
        net.down()


def _launch_until_crossed(net, argv, crossed, port="nic0p1", **kw):
    """Launches argv in a thread; returns it and the dict that gets its
    results ("r") once host 1's `port` has sent `crossed` bytes (60 s at most)
    while it runs: the moment to take a port down mid-run."""
    res = {}
    run = threading.Thread(target=lambda: res.update(r=net.launch(argv, **kw)))
    run.start()
    start = net.hosts[1].counters()[port][0]
    until = time.monotonic() + 60
    while net.hosts[1].counters()[port][0] - start < crossed and run.is_alive():
        assert time.monotonic() < until, f"the run did not start crossing {port}"
        time.sleep(0.05)
    assert run.is_alive(), "the run ended before the port could go down"
    return run, res


@pytest.mark.timeout(180)
def test_a_port_that_dies_mid_run_fails_over_and_is_taken_back():
    """1 rail x 2 planes, one rank per host: each connection's sockets leave
    from both ports. Host 1's plane-1 port goes down while allreduces run:
    each side's socket over it is given up once nothing was acknowledged for
    ACCL_LANE_TIMEOUT_MS while TCP retransmits, what the peer lacked goes
    again over plane 0, and every result is exact. The port comes back 2 s
    later: both sockets over it carry again (TCP delivers what they held,
    then the peer takes them back), before the run ends."""
    net = emunet(hosts=2, nics=1, planes=2, rate="400mbit")
    try:
        env = {**os.environ, "ACCL_LANE_TIMEOUT_MS": "300", "ACCL_TIMEOUT": "60"}
        run, res = _launch_until_crossed(
            net, [sys.executable, "-m", "accl.perf", "allreduce", "-b", "32M", "-e", "32M", "-n", "60", "-w", "1",
                  "-c", "1", "-d", "int32"], 40 << 20, timeout=170, env=env)
        net.set_link(1, 0, 1, up=False)
        after = net.hosts[1].counters()
        time.sleep(2)
        down = net.hosts[1].counters()
        net.set_link(1, 0, 1, up=True)
        back = time.monotonic()
        while net.hosts[1].counters()["nic0p1"][0] - down["nic0p1"][0] < 8 << 20 and run.is_alive():
            assert time.monotonic() - back < 60, "plane 1 was not taken back"
            time.sleep(0.05)
        assert run.is_alive(), "the run ended before plane 1 carried again"
        run.join()
        results = res["r"]
        out = "\n".join(r.stdout[-3000:] for r in results)
        assert all(r.returncode == 0 for r in results), out
        assert "# Out of bounds values : 0 OK" in results[0].stdout, out
        for r in results:
            assert "no byte acknowledged for" in r.stdout and "go again over lane 0" in r.stdout, r.stdout[-3000:]
            assert "lane 1 of 2 of a send connection" in r.stdout and "carries again" in r.stdout, r.stdout[-3000:]
        moved = down["nic0p0"][0] - after["nic0p0"][0]
        assert moved > 32 << 20, moved  # while it was down, plane 0 carried the run
    finally:
        net.down()


def _hier_allreduces_with_ports_down(ports, gap, iters):
    """2 hosts x 2 ranks x 2 rails x 2 planes at 300 Mbit/s, hierarchical
    allreduces of 16 MiB: once host 1's nic0p1 carried 8 MiB, each (host,
    rail, plane) of `ports` goes down, `gap` seconds apart. Asserts that
    every rank ends with rc 0 and exact results; returns all ranks' output."""
    net = emunet(hosts=2, nics=2, planes=2, rate="300mbit")
    try:
        env = {**os.environ, "ACCL_LANE_TIMEOUT_MS": "300", "ACCL_TIMEOUT": "60"}
        run, res = _launch_until_crossed(
            net, [sys.executable, "-m", "accl.perf", "allreduce", "-b", "16M", "-e", "16M", "-n", str(iters), "-w",
                  "1", "-c", "1", "-d", "int32"], 8 << 20, ranks_per_host=2, timeout=170, env=env)
        for k, (host, rail, plane) in enumerate(ports):
            if k and gap:
                time.sleep(gap)
                assert run.is_alive(), "the run ended before the next port could go down"
            net.set_link(host, rail, plane, up=False)
        run.join()
        results = res["r"]
        out = "\n".join(r.stdout[-3000:] for r in results)
        assert all(r.returncode == 0 for r in results), out
        assert "# Out of bounds values : 0 OK" in results[0].stdout, out
        return "".join(r.stdout for r in results)
    finally:
        net.down()


@pytest.mark.timeout(200)
def test_two_ports_die_under_the_hierarchical_collectives():
    """2 hosts x 2 ranks x 2 rails x 2 planes: the rails' connections (both
    planes each) and the flat ring's hop (all four ports). Two of host 1's
    ports go down mid-run, 3 s apart: every sender over them gives its socket
    up, whether its data was lost on the way (TCP retransmits) or never left
    (its own interface is down: TCP keeps it unsent, probing), and every
    result is exact."""
    said = _hier_allreduces_with_ports_down([(1, 0, 1), (1, 1, 0)], gap=3, iters=30)
    # (before "its interface is down" was a reason, an idle socket whose
    # own port died kept its last frame unsent and the run hung)
    assert "go again over lane" in said, said[-3000:]


@pytest.mark.timeout(150)
def test_a_whole_rail_down_moves_to_the_next_rail():
    """2 hosts x 2 ranks x 2 rails x 2 planes under the hierarchical
    allreduce: both ports of host 1's rail 1 go down. The rail connections
    over them have the next rail's ports standing by: their sockets on rail
    1 are given up, what they carried goes over rail 0's, and every result
    is exact."""
    said = _hier_allreduces_with_ports_down([(1, 1, 0), (1, 1, 1)], gap=0, iters=24)
    assert re.search(r"lane \d of 4 of a send connection \(\S+ \(nic1p[01]\) -> \S+\) failed: .* go again "
                     r"over lane [23] \(\S+ \(nic0p[01]\)", said), said[-3000:]


@pytest.mark.timeout(150)
def test_every_rail_a_connection_may_take_down_fails_within_the_timeout_naming_it():
    """2 hosts x 3 ranks x 3 rails: host 1's rails 1 and 2 go down. Rail 1's
    connections (rail 2 standing by) have no way left: they wait for a rail
    to come back (a port may only flap) until ACCL_TIMEOUT, then every rank
    fails, the stalled lane named with its NIC: never a hang."""
    net = emunet(hosts=2, nics=3, rate="300mbit")
    try:
        env = {**os.environ, "ACCL_LANE_TIMEOUT_MS": "300", "ACCL_TIMEOUT": "10"}
        run, res = _launch_until_crossed(
            net, [sys.executable, "-m", "accl.perf", "allreduce", "-b", "12M", "-e", "12M", "-n", "200", "-w", "1",
                  "-c", "1", "-d", "int32"], 4 << 20, ranks_per_host=3, timeout=120, env=env, port="nic1p0")
        net.set_link(1, 1, 0, up=False)
        net.set_link(1, 2, 0, up=False)
        down = time.monotonic()
        run.join()
        took = time.monotonic() - down
        results = res["r"]
        out = "\n".join(r.stdout[-3000:] for r in results)
        assert all(r.returncode != 0 and "killed after" not in r.stdout for r in results), out  # failed, not hung
        assert took < 10 + 30, (took, out)
        said = "".join(r.stdout for r in results)
        assert re.search(r"the last working lane of a send connection \(\S+ \(nic[12]p0\) -> \S+\) stalls", said), out
        assert "timed out (ACCL_TIMEOUT)" in said, out
    finally:
        net.down()


@pytest.mark.timeout(150)
def test_standby_on_one_end_only_stays_on_the_rails():
    """2 hosts x 2 ranks x 2 rails x 2 planes; rank 3 turns failover off
    (ACCL_LANE_TIMEOUT_MS=0), so its connections have no standby rail while
    their other ends do: each sender pairs only the NICs both ends merged,
    and no TCP connection joins two rails (seen mid-run with ss)."""
    net = emunet(hosts=2, nics=2, planes=2, rate="1gbit")
    try:
        argv = ["sh", "-c", '[ "$PMI_RANK" = 3 ] && export ACCL_LANE_TIMEOUT_MS=0; exec "$@"', "sh",
                sys.executable, "-m", "accl.perf", "allreduce", "-b", "16M", "-e", "16M", "-n", "20", "-w", "1",
                "-c", "1", "-d", "int32"]
        run, res = _launch_until_crossed(net, argv, 8 << 20, ranks_per_host=2, timeout=120)
        crossing = []
        for h in net.hosts:
            ss = subprocess.run(h.cmd(["ss", "-tnH", "state", "established"]), capture_output=True, text=True).stdout
            for line in ss.splitlines():
                local, peer = line.split()[-2], line.split()[-1]
                lr, pr = (int(a.rsplit(":", 1)[0].split(".")[2]) // 2 for a in (local, peer))
                if local.startswith("10.") and peer.startswith("10.") and lr != pr:
                    crossing.append(line)
        run.join()
        out = "\n".join(r.stdout[-2000:] for r in res["r"])
        assert all(r.returncode == 0 for r in res["r"]), out
        assert "# Out of bounds values : 0 OK" in res["r"][0].stdout, out
        assert not crossing, crossing
    finally:
        net.down()


@pytest.mark.timeout(180)
def test_topology_file_dumped_then_read_back(tmp_path):
    """2 hosts x 2 rails: rank 0 dumps its host's NICs (NCCL_TOPO_DUMP_FILE)
    as the subnets made them; a file that swaps the two rails, read back by
    every rank (NCCL_TOPO_FILE), is what the next run's topology declares.
    A file that does not parse fails every rank at init, naming it."""
    net = emunet(hosts=2, nics=2)
    try:
        dump = tmp_path / "topo.xml"
        argv = [sys.executable, "-m", "accl.perf", "allreduce", "-b", "1M", "-e", "1M", "-n", "2", "-w", "1", "-c", "1"]
        env = {**os.environ, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT", "NCCL_TOPO_DUMP_FILE": str(dump)}
        results = net.launch(argv, timeout=120, env=env)
        assert all(r.returncode == 0 for r in results), "\n".join(r.stdout[-2000:] for r in results)
        xml = dump.read_text()
        assert "rails from subnets" in xml and 'name="nic0p0"' in xml and 'rail="1"' in xml, xml
        swapped = xml.replace('rail="0"', 'rail="X"').replace('rail="1"', 'rail="0"').replace('rail="X"', 'rail="1"')
        (tmp_path / "swapped.xml").write_text(swapped)
        env = {**os.environ, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT",
               "NCCL_TOPO_FILE": str(tmp_path / "swapped.xml")}
        results = net.launch(argv, timeout=120, env=env)
        out = results[0].stdout
        assert all(r.returncode == 0 for r in results), "\n".join(r.stdout[-2000:] for r in results)
        assert "# Out of bounds values : 0 OK" in out, out[-3000:]
        assert "rails from declared" in out and "nic0p0 rail 1 plane 0" in out, out[-3000:]
        (tmp_path / "bad.xml").write_text("<system>\n<nic>\n</system>\n")
        env = {**os.environ, "NCCL_TOPO_FILE": str(tmp_path / "bad.xml")}
        results = net.launch(argv, timeout=60, env=env)
        assert all(r.returncode != 0 for r in results), "\n".join(r.stdout[-2000:] for r in results)
        assert f"NCCL_TOPO_FILE={tmp_path / 'bad.xml'}: line 3: </system> closes <nic>" in results[0].stdout
        for r in results:
            assert "could not describe its NICs" in r.stdout, r.stdout[-2000:]
    finally:
        net.down()


@pytest.mark.timeout(120)
def test_a_wrong_accl_nics_fails_every_rank_at_once(c_program):
    """A name that is no NIC of the host, on one rank: that rank says why,
    and every rank's init fails within seconds naming it (never a wait for
    ACCL_TIMEOUT)."""
    net = emunet(hosts=2, nics=1)
    try:
        results = net.launch(["sh", "-c", f'[ "$PMI_RANK" = 1 ] && export ACCL_NICS=nic9p0:0; '
                                          f'exec {c_program("rank_worker")} pmi pmi 1000 1'], timeout=60)
        assert all(r.returncode != 0 for r in results), "\n".join(r.stdout[-2000:] for r in results)
        assert "ACCL_NICS=nic9p0:0: 'nic9p0' is not a NIC of this host (it has nic0p0)" in results[1].stdout
        for r in results:
            assert "rank 1 could not describe its NICs (ACCL_NICS" in r.stdout, r.stdout[-2000:]
    finally:
        net.down()
