"""--csv, --json and --plot: the rows of a run, written by rank 0 at the end.

A row is a dict (see ROW_FIELDS); ACCL's out-of-place columns are `time_us`,
`algbw`, `busbw`, `wrong`, the in-place ones the same with `ip_`, and each
peer of --compare adds `<peer>_time_us`, `<peer>_busbw` and `x_<peer>`
(peer time / ACCL time, > 1: ACCL faster; empty where the peer has none).
"""

from __future__ import annotations

import csv
import json
import sys

ROW_FIELDS = ["collective", "nranks", "size", "count", "type", "redop", "root",
              "time_us", "algbw", "busbw", "wrong", "ip_time_us", "ip_algbw", "ip_busbw",
              "ip_wrong"]


def fields(peers: list[str]) -> list[str]:
    return ROW_FIELDS + [f"{p}_{c}" for p in peers for c in ("time_us", "busbw")] + \
        [f"x_{p}" for p in peers]


def write_csv(path: str, rows: list[dict], peers: list[str]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields(peers), extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: ("" if v is None else v) for k, v in row.items()})


def write_json(path: str, rows: list[dict], meta: dict) -> None:
    with open(path, "w") as f:
        json.dump({**meta, "rows": rows}, f, indent=1)
        f.write("\n")


def write_plot(path: str, rows: list[dict], peers: list[str], title: str) -> str | None:
    """busbw vs size, one line per library (and per type/op); None, or why not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib); no plot written"
    series: dict[str, list[tuple[int, float]]] = {}
    groups = sorted({(r["type"], r["redop"]) for r in rows})
    for r in rows:
        tag = "" if len(groups) == 1 else f" {r['type']} {r['redop']}"
        lines = [(f"accl out-of-place{tag}", "busbw"), (f"accl in-place{tag}", "ip_busbw")]
        lines += [(f"{p}{tag}", f"{p}_busbw") for p in peers]
        for label, key in lines:
            if r.get(key) is not None:
                series.setdefault(label, []).append((r["size"], r[key]))
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, pts in series.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def write_all(opts, rows: list[dict], meta: dict) -> None:
    peers = list(opts.compare)
    if opts.csv:
        write_csv(opts.csv, rows, peers)
    if opts.json:
        write_json(opts.json, rows, meta)
    if opts.plot:
        title = f"{meta['collective']}, {meta['nranks']} ranks"
        why = write_plot(opts.plot, rows, peers, title)
        if why:
            sys.stderr.write(f"accl.perf: --plot: {why}\n")
