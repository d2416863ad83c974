"""``--compare mpi,gloo``: time the same sweep with other libraries, before ACCL's run.

The launcher runs each peer as its own set of ranks (so the libraries never
share a process): MPI under ``mpirun --allow-run-as-root --oversubscribe
--bind-to none -np N python -m accl.perf <same flags>`` (its ranks then bind
themselves as ACCL's do, see binding.py), Gloo as N local ranks of accl.perf's own
launcher. Their rank 0 writes JSON; the launcher merges it into one file
whose path the ACCL ranks get in ACCL_PERF_COMPARE, and ACCL's rank 0 adds
the peers' columns to its table. A peer that is not installed or fails is
reported as ``# <peer>: not available (<reason>)`` and the run goes on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from . import launcher, peers, rendezvous
from .peer_gloo import ENV_GLOO_PORT

ENV_COMPARE = "ACCL_PERF_COMPARE"  # JSON: {peer: {"available", "reason", "version", "rows"}}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _missing(name: str) -> str | None:
    """Why peer `name` cannot run here, or None."""
    if name == "mpi":
        if importlib.util.find_spec("mpi4py") is None:
            return "mpi4py is not installed: pip install mpi4py"
        if shutil.which("mpirun") is None:
            return "mpirun not found: apt-get install openmpi-bin libopenmpi-dev"
    elif name == "gloo":
        if importlib.util.find_spec("torch") is None:
            return "torch is not installed: pip install torch"
    return None


def _peer_env(name: str, out: str, deadline: float) -> dict:
    env = dict(os.environ)
    for var in (rendezvous.ENV_RANK, rendezvous.ENV_NRANKS, rendezvous.ENV_UID, ENV_COMPARE):
        env.pop(var, None)
    env[peers.ENV_PEER] = name
    env[peers.ENV_PEER_OUT] = out
    env[rendezvous.ENV_DEADLINE] = repr(time.time() + max(deadline - time.monotonic(), 0) + 5)
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    env.setdefault("OMPI_MCA_btl_tcp_if_include", "lo")
    for var, value in launcher.QUIET_THREADS.items():  # mpirun's ranks as ACCL's
        env.setdefault(var, value)
    return env


def _run_mpi(argv: list[str], nranks: int, env: dict, timeout: float) -> str | None:
    # --bind-to none: the ranks bind themselves as ACCL's do (binding.py), so
    # both libraries run with the same placement whatever mpirun's default is.
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
           "-np", str(nranks), sys.executable, "-m", "accl.perf", *argv]
    try:
        res = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"mpirun timed out after {timeout:g} s"
    sys.stderr.write(res.stderr)
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or [""])[-1][:160]
        return f"mpirun exit code {res.returncode}{': ' + last if last else ''}"
    return None


def _run_gloo(argv: list[str], nranks: int, env: dict, timeout: float) -> str | None:
    env[ENV_GLOO_PORT] = str(_free_port())
    rc = launcher.launch(argv, nranks, timeout, env=env, share_uid=False)
    return None if rc == 0 else f"its ranks failed (exit code {rc})"


def _gloo_note(rows: list[dict]) -> str:
    """Why 'x gloo' reaches the hundreds or thousands at small sizes."""
    small = min(rows, key=lambda r: r["size"])
    return (f"# gloo: its {small['size']} B call took {small['time_us']:.0f} us: Gloo's ranks pass every step "
            "over TCP on loopback (a socket round trip and a wake-up of its I/O thread, each way), where "
            "ACCL's ranks of one host meet in shared memory in a few us; so 'x gloo' runs into the hundreds "
            "or thousands at small sizes and falls as the copies of large sizes take over")


def run(argv: list[str], opts) -> str:
    """Run every peer of opts.compare; returns the path of the merged JSON."""
    results: dict[str, dict] = {}
    tmp = tempfile.mkdtemp(prefix="accl-perf-")
    for name in opts.compare:
        reason = _missing(name)
        if reason is None:
            out = os.path.join(tmp, f"{name}.json")
            deadline = time.monotonic() + opts.timeout
            env = _peer_env(name, out, deadline)
            t0 = time.monotonic()
            runner = _run_mpi if name == "mpi" else _run_gloo
            reason = runner(argv, opts.nranks, env, opts.timeout)
            if reason is None:
                try:
                    with open(out) as f:
                        got = json.load(f)
                except (OSError, ValueError) as e:
                    reason = f"no results from its rank 0 ({e})"
        if reason is not None:
            print(f"# {name}: not available ({reason})", flush=True)
            results[name] = {"available": False, "reason": reason, "rows": []}
            continue
        got["available"], got["reason"] = True, ""
        results[name] = got
        how = "under mpirun" if name == "mpi" else "as local processes, tcp://127.0.0.1"
        place = "in-place" if got.get("in_place") else "out-of-place"
        print(f"# {name}: {got['version']}, {got['nranks']} ranks {how}, {len(got['rows'])} "
              f"sizes in {time.monotonic() - t0:.1f} s; 'x {name}' = {name} time / ACCL "
              f"{place} time (> 1: ACCL faster)", flush=True)
        if name == "gloo" and got["rows"]:
            print(_gloo_note(got["rows"]), flush=True)
        for s in got.get("skipped", []):
            print(f"# {name}: {s['type']} {s['redop']}: skipped ({s['reason']})", flush=True)
    path = os.path.join(tmp, "compare.json")
    with open(path, "w") as f:
        json.dump(results, f)
    return path


def load() -> dict | None:
    """The merged peer results, in an ACCL rank (None without --compare)."""
    path = os.environ.get(ENV_COMPARE)
    if not path:
        return None
    with open(path) as f:
        return json.load(f)


def lookup(results: dict) -> dict:
    """{(peer, type, redop, size): row} from load()'s results."""
    out = {}
    for name, res in results.items():
        for row in res.get("rows", []):
            out[(name, row["type"], row["redop"], row["size"])] = row
    return out
