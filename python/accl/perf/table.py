"""nccl-tests' output format: preamble, table header, rows and footer."""

from __future__ import annotations

import math


def float_str(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: as many decimals as fit in `width`."""
    if not math.isfinite(value):
        return f"{value:>{width}}"
    power, v = 0, 1
    while value >= v:
        power += 1
        v *= 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def preamble(name: str, accl_version: str, header_code: int, library_code: int, opts) -> list[str]:
    step = f"{opts.stepfactor}(factor)" if opts.stepfactor > 1 else f"{opts.stepbytes}(bytes)"
    return [
        f"# accl.perf version {accl_version} nccl-headers={header_code} "
        f"nccl-library={library_code}",
        f"# Collective test starting: {name}",
        f"# nThread 1 nGpus 1 minBytes {opts.minbytes} maxBytes {opts.maxbytes} step: {step} "
        f"warmup iters: {opts.warmup_iters} iters: {opts.iters} agg iters: 1 "
        f"validation: {opts.check} graph: 0",
        "#",
    ]


def device_lines(ranks: list[dict]) -> list[str]:
    lines = ["# Using devices"]
    for r in ranks:
        where = "host" if r["device"] < 0 else "cuda"
        why = r["mode"].split(": ", 1)[-1]  # "host: <why>": [host] says the first part
        lines.append(f"#  Rank {r['rank']:2d} Group  0 Pid {r['pid']:6d} on {r['host']:>10s} "
                     f"device {r['device']:2d} [{where}] {why}")
    return lines


def header() -> list[str]:
    blank = ("", "", "", "", "")
    return [
        "#",
        "# %10s  %12s  %8s  %6s  %6s           out-of-place"
        "                       in-place          " % blank,
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s"
        % ("size", "count", "type", "redop", "root",
           "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"),
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"
        % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
           "(GB/s)", ""),
    ]


def row_start(nbytes: int, count: int, typename: str, opname: str, root: int) -> str:
    return "%12d  %12d  %8s  %6s  %6d" % (nbytes, count, typename, opname, root)


def row_part(time_us: float, algbw: float, busbw: float, wrong: int | None) -> str:
    wrong_str = "  N/A" if wrong is None else "%5g" % wrong
    return "  %7s  %6s  %6s  %s" % (float_str(time_us, 7), float_str(algbw, 6),
                                   float_str(busbw, 6), wrong_str)


def footer(name: str, failed_tests: int, avg_busbw: float) -> list[str]:
    return [
        "# %-20s : %d %s" % ("Out of bounds values", failed_tests,
                             "FAILED" if failed_tests else "OK"),
        "# %-20s : %g " % ("Avg bus bandwidth", avg_busbw),
        "#   (in GB/s: the mean busbw of every row, out-of-place and in-place; the line as "
        "nccl-tests prints it, for the tools that read it)",
        "#",
        f"# Collective test concluded: {name}",
    ]


# -- --compare: a peer library's columns after the in-place ones ----------------
def compare_header(lines: list[str], names: list[str]) -> list[str]:
    """header() with `<peer> time` and `x <peer>` columns appended for each peer."""
    if not names:
        return lines
    out = list(lines)
    out[1] += "".join("  %9s  %6s" % ("", "") for _ in names)
    out[2] += "".join("  %9s  %6s" % (f"{n} time", f"x {n}") for n in names)
    out[3] += "".join("  %9s  %6s" % ("(us)", "") for _ in names)
    return out


def compare_part(peer_us: float | None, ratio: float | None) -> str:
    """`  <time>  <ratio>`; N/A where the peer has no time for this row."""
    if peer_us is None:
        return "  %9s  %6s" % ("N/A", "N/A")
    return "  %9s  %6s" % (float_str(peer_us, 9), "N/A" if ratio is None else ratio_str(ratio))


def ratio_str(ratio: float) -> str:
    """Two decimals, or a power of ten where they would print a ratio above 0 as 0.00 (a loaded machine)."""
    return "%6.2f" % ratio if ratio >= 0.005 or ratio <= 0 else "%6.0e" % ratio
