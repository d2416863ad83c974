"""Command line of ``python -m accl.perf``: nccl-tests' flags and meanings."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field

from .binding import MODES as BIND_MODES
from .collectives import COLLECTIVES

# nccl-tests' datatype names first (as printed in the "type" column), then aliases.
DATATYPES = {
    "int8": "int8", "uint8": "uint8", "int32": "int32", "uint32": "uint32",
    "int64": "int64", "uint64": "uint64", "half": "float16", "float": "float32",
    "double": "float64", "bfloat16": "bfloat16", "f8e4m3": "float8_e4m3fn",
    "f8e5m2": "float8_e5m2",
}
DATATYPE_ALIASES = {
    "char": "int8", "int": "int32", "float16": "half", "fp16": "half", "float32": "float",
    "fp32": "float", "float64": "double", "fp64": "double", "bf16": "bfloat16",
}
ALL_DATATYPES = list(DATATYPES)  # -d all: every one, as nccl-tests' drivers (and ACCL's C drivers) do
OPS = ["sum", "prod", "max", "min", "avg"]
PEERS = ["mpi", "gloo"]  # --compare: OpenMPI (mpi4py under mpirun), Gloo (torch.distributed)
AVERAGE_NAMES = {0: "rank 0", 1: "average", 2: "minimum", 3: "maximum"}


def parse_size(text: str) -> int:
    """Bytes from nccl-tests' size syntax: a number with an optional K/M/G suffix (x1024)."""
    s = text.strip()
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    scale = units.get(s[-1:].lower(), 1)
    if scale != 1:
        s = s[:-1]
    try:
        value = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid size {text!r} (e.g. 8, 64K, 32M, 1G)") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"invalid size {text!r}: not a finite number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"invalid size {text!r}: negative")
    return int(value * scale)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid time {text!r} (seconds, e.g. 300)") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"invalid time {text!r}: a positive number of seconds")
    return value


def _datatype(text: str) -> str:
    name = DATATYPE_ALIASES.get(text, text)
    if name != "all" and name not in DATATYPES:
        raise argparse.ArgumentTypeError(
            f"unknown datatype {text!r} (one of {', '.join(DATATYPES)}, all)")
    return name


def _peers(text: str) -> list[str]:
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in PEERS]
    if bad:
        raise argparse.ArgumentTypeError(
            f"unknown peer {bad[0]!r} for --compare (one of {', '.join(PEERS)})")
    return list(dict.fromkeys(names))


def _op(text: str) -> str:
    if text != "all" and text not in OPS:
        raise argparse.ArgumentTypeError(f"unknown op {text!r} (one of {', '.join(OPS)}, all)")
    return text


@dataclass
class Options:
    collective: str
    nranks: int
    minbytes: int
    maxbytes: int
    stepbytes: int
    stepfactor: int  # > 1: multiply; otherwise add stepbytes
    iters: int
    warmup_iters: int
    check: int
    datatypes: list[str]
    ops: list[str]
    average: int
    timeout: float
    compare: list[str] = field(default_factory=list)  # peers: "mpi", "gloo"
    plot: str | None = None  # busbw-vs-size PNG
    csv: str | None = None
    json: str | None = None
    progress: bool = False  # a line per size to stderr (else only sizes taking > 2 s)
    bind_to: str = "core"  # "core": rank r on the r-th allowed CPU (binding.py); "none"
    local_register: int = 0  # nccl-tests' -R: 1 ncclCommRegister, 2 ncclMemAlloc + symmetric windows
    root: int = 0  # -r: the root of broadcast, reduce, gather and scatter

    def sizes(self) -> list[int]:
        """The byte sizes of the sweep, minbytes to maxbytes inclusive."""
        out, size = [], self.minbytes
        while size <= self.maxbytes:
            out.append(size)
            nxt = size * self.stepfactor if self.stepfactor > 1 else size + self.stepbytes
            if nxt <= size:  # 0 * factor, or a zero step: the sweep would never end
                break
            size = nxt
        return out


DEFAULT_BYTES = 32 << 20  # -b and -e when not given: one size
DEFAULT_BYTES_TEXT = "32M"
PLOT_SWEEP = (8, 32 << 20, 2)  # --plot alone: a curve, not one size
PLOT_SWEEP_TEXT = "8 to 32M, factor 2"


def _matplotlib_found() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _check_plot(p: argparse.ArgumentParser, path: str) -> None:
    """Before the run: the plot can be drawn and written."""
    import os

    if not _matplotlib_found():
        p.error("--plot needs matplotlib, which is not installed: pip install 'accl[plot]' "
                "(or pip install matplotlib)")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        p.error(f"--plot {path}: cannot write in {folder}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m accl.perf",
        description="nccl-tests-style benchmark. Without a launcher around it, starts "
                    "-np local ranks itself; host mode where there is no GPU.")
    p.add_argument("collective", choices=sorted(COLLECTIVES), help="operation to benchmark")
    p.add_argument("-np", "--nranks", type=int, default=2, help="local ranks to start (default 2)")
    p.add_argument("-b", "--minbytes", type=parse_size, default=None,
                   help=f"smallest size ({DEFAULT_BYTES_TEXT}; with --plot {PLOT_SWEEP_TEXT})")
    p.add_argument("-e", "--maxbytes", type=parse_size, default=None,
                   help=f"largest size ({DEFAULT_BYTES_TEXT}; with --plot {PLOT_SWEEP_TEXT})")
    p.add_argument("-i", "--stepbytes", type=parse_size, default=None,
                   help="add this many bytes per step (used when -f is not given)")
    p.add_argument("-f", "--stepfactor", type=int, default=None, help="multiply size by this (2)")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed iterations (20)")
    p.add_argument("-w", "--warmup_iters", type=int, default=5, help="warm-up iterations (5)")
    p.add_argument("-c", "--check", type=int, default=1, help="check results (1) or not (0)")
    p.add_argument("-d", "--datatype", type=_datatype, default="float",
                   help=f"{' '.join(DATATYPES)}, or all (default float)")
    p.add_argument("-o", "--op", type=_op, default="sum", help="sum prod max min avg, or all")
    p.add_argument("-a", "--average", type=int, choices=sorted(AVERAGE_NAMES), default=1,
                   help="time reported: 0 rank 0, 1 average (default, as nccl-tests), 2 min, 3 max")
    p.add_argument("-T", "--timeout", type=_seconds, default=300.0,
                   help="seconds before the whole run is stopped (300)")
    p.add_argument("-R", "--local_register", type=int, choices=(0, 1, 2), default=0,
                   help="ACCL's buffers: 0 plain (default), 1 registered with ncclCommRegister, "
                        "2 from ncclMemAlloc in windows registered with NCCL_WIN_COLL_SYMMETRIC "
                        "(the direct collectives, on one host)")
    p.add_argument("-r", "--root", type=int, default=0,
                   help="root rank of broadcast, reduce, gather and scatter (0)")
    p.add_argument("--compare", type=_peers, default=[], metavar="mpi,gloo",
                   help="also time the same sizes with OpenMPI (mpi4py under mpirun) and/or "
                        "Gloo (torch.distributed); adds 'mpi time', 'x mpi', ... columns")
    p.add_argument("--plot", metavar="FILE.png", default=None,
                   help="busbw vs size, one line per library (needs matplotlib: "
                        "pip install 'accl[plot]'); without -b, -e and -f it sweeps "
                        f"{PLOT_SWEEP_TEXT}")
    p.add_argument("--csv", metavar="FILE", default=None, help="write the rows as CSV")
    p.add_argument("-J", "--json", metavar="FILE", default=None, help="write the rows as JSON")
    p.add_argument("--progress", action="store_true",
                   help="a '# [k/N] size ...' line on stderr after every size "
                        "(without it: only for sizes that take more than 2 s)")
    p.add_argument("--bind-to", choices=BIND_MODES, default="core",
                   help="core (default): each rank that accl.perf starts, the --compare "
                        "peers' included, on its own CPU, as mpirun binds its ranks (when "
                        "there are enough CPUs); none: where the scheduler puts them")
    return p


def parse(argv: list[str]) -> Options:
    p = build_parser()
    a = p.parse_args(argv)
    if a.nranks < 1:
        p.error("-np must be at least 1")
    if a.iters < 1 or a.warmup_iters < 0:
        p.error("-n must be >= 1 and -w >= 0")
    if a.root < 0:
        p.error("-r must be a rank (>= 0)")
    if a.plot:
        _check_plot(p, a.plot)
        if a.minbytes is None and a.maxbytes is None and a.stepfactor is None and a.stepbytes is None:
            a.minbytes, a.maxbytes, a.stepfactor = PLOT_SWEEP
    given_min, given_max = a.minbytes is not None, a.maxbytes is not None
    a.minbytes = DEFAULT_BYTES if a.minbytes is None else a.minbytes
    a.maxbytes = DEFAULT_BYTES if a.maxbytes is None else a.maxbytes
    if a.minbytes > a.maxbytes:
        if not given_min:
            p.error(f"-e {a.maxbytes} is below -b's default ({DEFAULT_BYTES_TEXT}): give -b too, e.g. -b 8")
        if not given_max:
            p.error(f"-b {a.minbytes} is above -e's default ({DEFAULT_BYTES_TEXT}): give -e too")
        p.error(f"-b (minbytes, {a.minbytes}) is larger than -e (maxbytes, {a.maxbytes})")
    if a.stepfactor is not None and a.stepfactor < 1:
        p.error("-f must be >= 1")
    factor = a.stepfactor if a.stepfactor is not None else (1 if a.stepbytes is not None else 2)
    stepbytes = a.stepbytes if a.stepbytes is not None else 1 << 20
    if factor <= 1 and stepbytes <= 0:
        p.error("-i must be > 0 when stepping by bytes")
    types = ALL_DATATYPES if a.datatype == "all" else [a.datatype]
    ops = OPS if a.op == "all" else [a.op]
    return Options(a.collective, a.nranks, a.minbytes, a.maxbytes, stepbytes, factor, a.iters,
                   a.warmup_iters, a.check, types, ops, a.average, a.timeout, a.compare,
                   a.plot, a.csv, a.json, a.progress, a.bind_to, a.local_register, a.root)
