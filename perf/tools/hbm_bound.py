"""Each perf-driver table against the memory bound of ranks sharing one GPU.

    python3 perf/tools/hbm_bound.py BYTES_PER_SECOND RANKS FILE...

Every FILE is one driver's output (its name says which collective: the
driver's own last line). The bound is the bytes every rank must read and
write, over what one device-to-device copy moves (BYTES_PER_SECOND, measured
in the same session), with S the size nccl-tests prints and N the ranks:

- allreduce, alltoall, sendrecv: 2·N·S (each rank reads its S, writes its S);
- allgather, reducescatter, broadcast, reduce: (N+1)·S (the inputs once, the
  outputs once);
- gather, scatter: 2·S (the root's buffer once, every other part once).

Prints one row per size and placement: time, bound, and the bound over the
time (1.0 is the copy's speed).
"""
import re
import sys

FACTORS = {
    "all_reduce_perf": lambda n: 2 * n,
    "alltoall_perf": lambda n: 2 * n,
    "sendrecv_perf": lambda n: 2 * n,
    "all_gather_perf": lambda n: n + 1,
    "reduce_scatter_perf": lambda n: n + 1,
    "broadcast_perf": lambda n: n + 1,
    "reduce_perf": lambda n: n + 1,
    "gather_perf": lambda n: 2,
    "scatter_perf": lambda n: 2,
}
ROW = re.compile(r"^\s+(\d+)\s+\d+\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+\S+\s+\S+\s+(\S+)\s+([\d.]+)\s+\S+\s+\S+\s+(\S+)")


def rows(path):
    text = open(path).read()
    name = re.search(r"Collective test concluded: (\w+)", text)
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            yield (name.group(1) if name else "?"), int(m[1]), float(m[2]), m[3], float(m[4]), m[5]


def main(argv):
    rate, ranks = float(argv[1]), int(argv[2])
    print(f"# {ranks} ranks, bound at {rate / 1e9:.0f} GB/s")
    print(f"{'driver':<20} {'size':>10} {'oop us':>9} {'ip us':>9} {'bound us':>9} {'oop':>5} {'ip':>5} wrong")
    for path in argv[3:]:
        for name, size, oop, oop_wrong, ip, ip_wrong in rows(path):
            factor = FACTORS.get(name)
            if not factor:
                continue
            bound = factor(ranks) * size / rate * 1e6
            print(f"{name:<20} {size:>10} {oop:>9.1f} {ip:>9.1f} {bound:>9.1f} {bound / oop:>5.2f} {bound / ip:>5.2f} "
                  f"{oop_wrong}/{ip_wrong}")


if __name__ == "__main__":
    main(sys.argv)
