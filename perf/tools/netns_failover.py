"""A port's failure and return under load, between emulated hosts
(accl.emunet): a loop of allreduces on hosts x 1 rail x 2 planes, shaped
ports; host 1's plane-1 port goes down once the loop runs, and up again
later. Samples every port's bytes sent on a clock and prints, as a table:
what each plane carried before, while the port was down and after it came
back (MB/s on the wire, against one port's rate), how long after the port
came back plane 1 carried again, and the run's own verdict (rc, wrong
results). Needs root and iproute2.

    python perf/tools/netns_failover.py --rate 1gbit -b 64M -n 60 --down-after 8 --down-for 10
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time

from accl.emunet import EmuNet

RATE = re.compile(r"^(\d+(?:\.\d+)?)([kmg]?)bit$")


def bits_per_s(rate: str) -> float:
    m = RATE.match(rate)
    if not m:
        raise SystemExit(f"--rate {rate}: say e.g. 400mbit or 1gbit")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--rate", default="1gbit", help="each port's rate (tc tbf)")
    p.add_argument("-b", "--bytes", default="64M", help="each allreduce's size")
    p.add_argument("-n", "--iters", type=int, default=60)
    p.add_argument("--down-after", type=float, default=8, help="seconds of the loop before the port goes down")
    p.add_argument("--down-for", type=float, default=10, help="seconds it stays down")
    p.add_argument("--lane-timeout-ms", default="1000", help="ACCL_LANE_TIMEOUT_MS")
    p.add_argument("--sample", type=float, default=0.1, help="seconds between samples of the counters")
    a = p.parse_args()

    port_mb_s = bits_per_s(a.rate) / 8e6
    net = EmuNet(hosts=a.hosts, nics=1, planes=2, rate=a.rate).up()
    try:
        env = {**os.environ, "ACCL_LANE_TIMEOUT_MS": a.lane_timeout_ms, "ACCL_TIMEOUT": "120"}
        argv = [sys.executable, "-m", "accl.perf", "allreduce", "-b", a.bytes, "-e", a.bytes, "-n", str(a.iters),
                "-w", "1", "-c", "1", "-d", "int32"]
        res = {}
        run = threading.Thread(target=lambda: res.update(r=net.launch(argv, timeout=3600, env=env)))
        samples = []  # (seconds, host 1's plane-0 bytes sent, its plane-1 bytes sent)
        t0 = time.monotonic()

        def sample():
            c = net.hosts[1].counters()
            samples.append((time.monotonic() - t0, c["nic0p0"][0], c["nic0p1"][0]))

        run.start()
        events = {}
        sample()
        while run.is_alive():
            now = time.monotonic() - t0
            if "down" not in events and now >= a.down_after:
                net.set_link(1, 0, 1, up=False)
                events["down"] = time.monotonic() - t0
            elif "down" in events and "up" not in events and now >= events["down"] + a.down_for:
                net.set_link(1, 0, 1, up=True)
                events["up"] = time.monotonic() - t0
            sample()
            time.sleep(a.sample)
        run.join()
        results = res["r"]
    finally:
        net.down()

    def rate(lo: float, hi: float, col: int) -> float:
        inside = [s for s in samples if lo <= s[0] <= hi]
        if len(inside) < 2:
            return float("nan")
        return (inside[-1][col] - inside[0][col]) / (inside[-1][0] - inside[0][0]) / 1e6

    end = samples[-1][0]
    down, up = events.get("down", end), events.get("up", end)
    # When plane 1 carried again: the first sample after `up` from which it
    # sent at a tenth of a port's rate or more until the next.
    back = None
    for s, t in zip(samples, samples[1:]):
        if s[0] >= up and (t[2] - s[2]) / max(t[0] - s[0], 1e-9) / 1e6 > port_mb_s / 10:
            back = s[0] - up
            break
    wrong = sum(int(m) for r in results for m in re.findall(r"# Out of bounds values : (\d+)", r.stdout))
    print(f"# {a.hosts} hosts x 1 rail x 2 planes, {a.rate} a port ({port_mb_s:.1f} MB/s), allreduce {a.bytes} "
          f"x {a.iters}, ACCL_LANE_TIMEOUT_MS={a.lane_timeout_ms}; host 1's plane-1 port down at "
          f"{down:.1f} s, up at {up:.1f} s, the run ended at {end:.1f} s")
    print("| phase | seconds | plane 0 MB/s | plane 1 MB/s | both, of one port's rate |")
    print("|---|---|---|---|---|")
    settle = 2.0  # the failover's own seconds left out of "down": what it ran at once it had moved
    for name, lo, hi in (("before", 1.0, down), ("down", down + settle, up), ("back", up + (back or 0) + 0.5, end)):
        p0, p1 = rate(lo, hi, 1), rate(lo, hi, 2)
        print(f"| {name} | {lo:.1f}-{hi:.1f} | {p0:.1f} | {p1:.1f} | {(p0 + p1) / port_mb_s:.2f} |")
    print(f"\nplane 1 carried again {back:.1f} s after its port came back" if back is not None
          else "\nplane 1 did not carry again before the run ended")
    print(f"rc {[r.returncode for r in results]}; wrong results {wrong}")
    if any(r.returncode for r in results):
        for r in results:
            print(r.stdout[-3000:])
    return 0 if all(r.returncode == 0 for r in results) and wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
