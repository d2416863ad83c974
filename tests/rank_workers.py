"""Running a test file's worker suites as rank processes: each rank runs
`python FILE --worker SUITE RANK` with MASTER_ADDR/PORT and WORLD_SIZE set,
and must exit 0 having printed "SUITE OK". Shared by the torch backend tests
(CPU and GPU)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(script: str, suite: str, nranks: int, **env: str) -> list[subprocess.Popen]:
    full = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), NCCL_SOCKET_IFNAME="lo",
                WORLD_SIZE=str(nranks), **env)
    return [subprocess.Popen([sys.executable, script, "--worker", suite, str(r)], env=full, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True) for r in range(nranks)]


def collect(procs: list[subprocess.Popen], what: str, timeout: float) -> list[str]:
    """Every rank's output; a rank still running after `timeout` fails the test (all are killed)."""
    try:
        return [p.communicate(timeout=timeout)[0] for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        outs = [p.communicate()[0] for p in procs]
        pytest.fail(f"{what}: timed out after {timeout}s\n" + "\n".join(
            f"--- rank {r} ---\n{o[-4000:]}" for r, o in enumerate(outs)))


def spawn(script: str, suite: str, nranks: int, timeout: float, **env: str) -> None:
    """Runs the suite on every rank; fails with every failed rank's output.
    free_port()'s port may be taken by another socket before rank 0's store
    listens on it (EADDRINUSE): then the ranks start again on a new port."""
    for attempt in range(3):
        procs = start(script, suite, nranks, **env)
        end = time.time() + timeout
        try:
            first = procs[0].communicate(timeout=timeout)[0]
        except subprocess.TimeoutExpired:
            collect(procs, suite, 0)  # kills them all and fails with their output
        if procs[0].returncode != 0 and "EADDRINUSE" in first and attempt < 2:
            for p in procs[1:]:
                p.kill()
                p.communicate()
            continue
        outs = [first] + collect(procs[1:], suite, max(1.0, end - time.time()))
        break
    bad = [r for r, p in enumerate(procs) if p.returncode != 0 or f"{suite} OK" not in outs[r]]
    if bad:
        pytest.fail(f"{suite}: ranks {bad} failed\n" + "\n".join(
            f"--- rank {r} (rc {procs[r].returncode}) ---\n{outs[r][-6000:]}" for r in bad))
