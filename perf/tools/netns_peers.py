"""ACCL against its peers between emulated hosts (accl.emunet), in one run:
OpenMPI's TCP transport (perf/tools/mpi_coll.c under EmuNet.mpirun), Gloo
(torch.distributed) and the wire (plain TCP streams both ways at once).
Each collective's busbw (nccl-tests' formulas) per size, and the time at
the smallest size; rounds alternate the libraries, and a cell gives the
range over rounds. Needs root, iproute2, OpenMPI (mpicc) and, for Gloo, torch.

    python perf/tools/netns_peers.py --hosts 2 --nics 1 -b 8 -e 256M -f 8 --rounds 2 > peers.md

Several ranks, rails and planes per host (an HPN layout; shaped ports):
each ACCL run also counts the bytes that crossed between rails (the
spine's counters) and how evenly the hosts' ports carried them.

    python perf/tools/netns_peers.py --hosts 2 --ranks-per-host 4 --nics 4 --rate 1gbit -b 1M -e 64M -f 4
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

from accl.emunet import EmuNet

HERE = os.path.dirname(os.path.abspath(__file__))
# busbw = algbw x this (nccl-tests), n ranks
FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
          "reducescatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n, "sendrecv": lambda n: 1.0}

# One Gloo rank: times COLL at each size (bytes as nccl-tests counts them),
# prints "size us" lines; "unsupported" where Gloo has no such call.
GLOO = r'''
import os, sys, time, torch, torch.distributed as dist
coll, sizes, iters = sys.argv[1], [int(s) for s in sys.argv[2].split(",")], int(sys.argv[3])
r, n = int(os.environ["PMI_RANK"]), int(os.environ["PMI_SIZE"])
dist.init_process_group("gloo", rank=r, world_size=n)
for size in sizes:
    count = max(size // 4, n)
    if coll == "allreduce":
        t = torch.ones(count); f = lambda: dist.all_reduce(t)
    elif coll == "allgather":
        t = torch.ones(max(count // n, 1)); out = [torch.empty_like(t) for _ in range(n)]; f = lambda: dist.all_gather(out, t)
    elif coll == "reducescatter":
        ins = [torch.ones(max(count // n, 1)) for _ in range(n)]; out = torch.empty_like(ins[0]); f = lambda: dist.reduce_scatter(out, ins)
    elif coll == "alltoall":
        t = torch.ones(count); out = torch.empty_like(t); f = lambda: dist.all_to_all_single(out, t)
    else:
        t = torch.ones(count); out = torch.empty_like(t)
        def f():
            reqs = [dist.isend(t, (r + 1) % n), dist.irecv(out, (r - 1) % n)]
            for q in reqs: q.wait()
    try:
        f()
    except (RuntimeError, NotImplementedError, ValueError):
        print("unsupported", flush=True); break
    k = max(3, min(iters, int(2e8 / (size + 4096))))
    dist.barrier(); t0 = time.perf_counter()
    for _ in range(k): f()
    dist.barrier()
    if r == 0: print(size, (time.perf_counter() - t0) / k * 1e6, flush=True)
dist.destroy_process_group()
'''


def parse_size(s: str) -> int:
    m = re.fullmatch(r"(\d+)([KMG]?)", s.upper())
    return int(m[1]) << {"": 0, "K": 10, "M": 20, "G": 30}[m[2]]


def size_us(out: str) -> dict[int, float]:
    """{size: us} from the "size us" lines of mpi_coll and of the Gloo ranks."""
    rows = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0].isdigit():
            rows[int(f[0])] = float(f[1])
    return rows


def tx_bytes(net):
    return {(h.index, name): tx for h in net.hosts for name, (tx, _) in h.counters().items()}


def accl_times(net, coll, lo, hi, factor, iters, per_host, traffic):
    """{size: us}, an error; adds the run's spine bytes and per-port bytes sent to `traffic`."""
    spine, before = net.spine_bytes(), tx_bytes(net)
    res = net.launch([sys.executable, "-m", "accl.perf", coll, "-b", str(lo), "-e", str(hi), "-f", str(factor),
                      "-n", str(iters), "-w", "3", "-c", "0", "-d", "float"], ranks_per_host=per_host, timeout=1800)
    traffic.setdefault("spine", []).append(net.spine_bytes() - spine)
    after = tx_bytes(net)
    traffic.setdefault("ports", []).append({k: after[k] - before[k] for k in after})
    if any(r.returncode for r in res):
        return {}, res[0].stdout[-2000:]
    rows = {}
    for line in res[0].stdout.splitlines():
        f = line.split()
        if len(f) >= 13 and f[0].isdigit():
            rows[int(f[0])] = float(f[5])  # out of place, us
    return rows, ""


def mpi_times(net, coll, lo, hi, exe, per_host):
    res = net.mpirun(["--mca", "btl", "tcp,self", "--mca", "mpi_yield_when_idle", "1", exe, coll, str(lo), str(hi)],
                     ranks_per_host=per_host, timeout=1800)
    return size_us(res.stdout), "" if res.returncode == 0 else res.stdout[-2000:]


def gloo_times(net, coll, sizes, iters, per_host):
    env = dict(os.environ, MASTER_ADDR=net.hosts[0].ports[0].addr, MASTER_PORT=str(29500 + os.getpid() % 1000))
    env["GLOO_SOCKET_IFNAME"] = net.hosts[0].ports[0].ifname  # the same name on every host
    res = net.launch([sys.executable, "-c", GLOO, coll, ",".join(map(str, sizes)), str(iters)],
                     ranks_per_host=per_host, timeout=1800, env=env)
    return size_us(res[0].stdout), "" if all(r.returncode == 0 for r in res) else res[0].stdout[-2000:]


def span(vals, fmt):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "n/a"
    lo, hi = min(vals), max(vals)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}-{fmt.format(hi)}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--nics", type=int, default=1)
    p.add_argument("--planes", type=int, default=1)
    p.add_argument("--ranks-per-host", type=int, default=1)
    p.add_argument("--rate", default=None)
    p.add_argument("-b", default="8")
    p.add_argument("-e", default="256M")
    p.add_argument("-f", type=int, default=8)
    p.add_argument("-n", type=int, default=20, help="ACCL's and Gloo's iterations per size (at most)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--collectives", default="allreduce,allgather,reducescatter,alltoall,sendrecv")
    a = p.parse_args()
    lo, hi = parse_size(a.b), parse_size(a.e)
    sizes = []
    s = lo
    while s <= hi:
        sizes.append(s)
        s *= a.f
    tmp = tempfile.mkdtemp(prefix="netns-peers-")
    exe = os.path.join(tmp, "mpi_coll")
    subprocess.run(["mpicc", "-O2", "-o", exe, os.path.join(HERE, "mpi_coll.c")], check=True)
    colls = a.collectives.split(",")
    per = a.ranks_per_host
    n = a.hosts * per
    traffic = {c: {} for c in colls}
    with EmuNet(hosts=a.hosts, nics=a.nics, planes=a.planes, rate=a.rate) as net:
        wire = []
        results = {c: {lib: {} for lib in ("accl", "mpi", "gloo")} for c in colls}
        for rnd in range(a.rounds):
            rates = net.streams(0, 1, per_port=1, seconds=3, both=True)
            wire.append(sum(v for k, v in rates.items() if k.endswith("0->1")) / 1e3)  # GB/s one way
            for c in colls:
                for lib, (rows, err) in (("accl", accl_times(net, c, lo, hi, a.f, a.n, per, traffic[c])),
                                         ("mpi", mpi_times(net, c, lo, hi, exe, per)),
                                         ("gloo", gloo_times(net, c, sizes, a.n, per))):
                    if err:
                        print(f"# round {rnd} {c} {lib}: failed: {err!r}", file=sys.stderr)
                    for size, us in rows.items():
                        results[c][lib].setdefault(size, []).append(us)
                print(f"# round {rnd + 1} of {a.rounds}: {c} done", file=sys.stderr, flush=True)
    print(f"# {a.hosts} hosts x {per} rank(s) x {a.nics} rail(s) x {a.planes} plane(s)"
          f"{', ' + a.rate + ' a port' if a.rate else ', unshaped'}; "
          f"{a.rounds} round(s); the wire (streams both ways at once, per direction): {span(wire, '{:.2f}')} GB/s")
    print("# busbw GB/s (out of place) per size; the first size: time in us. ACCL/wire uses the best wire round.")
    for c in colls:
        print(f"\n### {c}\n")
        ports = traffic[c].get("ports", [])
        if ports and net.spine:
            sent = [v for run in ports for v in run.values()]
            print(f"ACCL's runs: {span(traffic[c]['spine'], '{:.0f}')} bytes crossed between rails (the spine); "
                  f"each port sent {min(sent) / 1e6:.0f}-{max(sent) / 1e6:.0f} MB (least/most {min(sent) / max(max(sent), 1):.2f})\n")
        print("| size | ACCL | OpenMPI (TCP BTL) | Gloo | ACCL / wire | ACCL / MPI | ACCL / Gloo |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for size in sizes:
            cell, bw = {}, {}
            for lib in ("accl", "mpi", "gloo"):
                ts = results[c][lib].get(size, [])
                if size == sizes[0]:
                    cell[lib] = span(ts, "{:.1f} us")
                    bw[lib] = [1 / t for t in ts] if ts else []
                else:
                    bw[lib] = [size / (t * 1e-6) / 1e9 * FACTOR[c](n) for t in ts]
                    cell[lib] = span(bw[lib], "{:.2f}")

            def ratio(x, y):
                return span([u / v for u in x for v in y], "{:.2f}") if x and y else "n/a"
            vs_wire = ratio(bw["accl"], [max(wire)]) if size != sizes[0] else ""
            print(f"| {size} | {cell['accl']} | {cell['mpi']} | {cell['gloo']} | {vs_wire} | "
                  f"{ratio(bw['accl'], bw['mpi'])} | {ratio(bw['accl'], bw['gloo'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
