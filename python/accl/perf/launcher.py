"""Starts N local ranks of ``python -m accl.perf`` and watches them.

Rank 0 starts first and hands back the unique id (hex, through a pipe);
the other ranks get it in ACCL_PERF_UID. If a rank fails, the others are
stopped and the failing rank is named; past the deadline, all are stopped.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

from . import rendezvous

EXIT_TIMEOUT = 124

# A rank imports NumPy, whose OpenBLAS starts worker threads that spin for
# ~0.1 s after the import. Nothing here uses BLAS, but such a thread took the
# CPU of a bound rank (--bind-to) in 4 ms slices, just when the first sizes
# were timed (a 2-rank 8 B allreduce read 0.5-1.3 ms instead of 1 us). So the
# ranks accl.perf starts (ACCL's and the --compare peers') get one BLAS thread
# unless the user set OPENBLAS_NUM_THREADS.
QUIET_THREADS = {"OPENBLAS_NUM_THREADS": "1"}


class LaunchError(Exception):
    """The run failed; the message says which rank and how."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def _env(rank: int, nranks: int, deadline: float, base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    env.setdefault("NCCL_SOCKET_IFNAME", "lo")
    for var, value in QUIET_THREADS.items():
        env.setdefault(var, value)
    env.pop(rendezvous.ENV_UID, None)  # rank 0 creates the id; the launcher hands it on
    env[rendezvous.ENV_RANK] = str(rank)
    env[rendezvous.ENV_NRANKS] = str(nranks)
    # The ranks' own watchdog fires a little after ours, as a backstop.
    env[rendezvous.ENV_DEADLINE] = repr(time.time() + max(deadline - time.monotonic(), 0) + 5)
    return env


def _read_uid(fd: int, rank0: subprocess.Popen, deadline: float) -> str:
    text = b""
    while not text.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise LaunchError("timed out waiting for rank 0's unique id", EXIT_TIMEOUT)
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if ready:
            chunk = os.read(fd, 512)
            if not chunk:  # rank 0 closed the pipe without an id
                rc = rank0.wait()
                raise LaunchError(f"rank 0 failed before creating the unique id (exit code {rc})",
                                  rc or 1)
            text += chunk
        elif rank0.poll() is not None:
            raise LaunchError(f"rank 0 exited (code {rank0.returncode}) before creating the "
                              "unique id", rank0.returncode or 1)
    return text.decode().strip()


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    end = time.monotonic() + 3
    for p in procs:
        try:
            p.wait(timeout=max(end - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _watch(procs: list[subprocess.Popen], deadline: float, timeout: float) -> int:
    while True:
        codes = [p.poll() for p in procs]
        failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            rank, code = failed[0]
            raise LaunchError(f"rank {rank} failed (exit code {code}); stopped the other ranks",
                              code if code > 0 else 1)
        if all(c == 0 for c in codes):
            return 0
        if time.monotonic() > deadline:
            running = ", ".join(str(r) for r, c in enumerate(codes) if c is None)
            raise LaunchError(f"timed out after {timeout:g} s; ranks still running: {running}",
                              EXIT_TIMEOUT)
        time.sleep(0.05)


def launch(argv: list[str], nranks: int, timeout: float, command: list[str] | None = None,
           *, env: dict | None = None, share_uid: bool = True) -> int:
    """Run `python -m accl.perf <argv>` as `nranks` local ranks; returns an exit code.

    `command` replaces `python -m accl.perf` (tests use it to launch stand-ins);
    `env` replaces os.environ as the ranks' base environment. Without
    `share_uid` (a peer library's ranks, which need no ACCL unique id) all
    ranks start at once.
    """
    deadline = time.monotonic() + timeout
    cmd = [*(command or [sys.executable, "-m", "accl.perf"]), *argv]
    procs: list[subprocess.Popen] = []
    read_fd, write_fd = os.pipe()
    try:
        if not share_uid:
            os.close(write_fd)
            write_fd = -1
            for rank in range(nranks):
                procs.append(subprocess.Popen(cmd, env=_env(rank, nranks, deadline, env)))
            return _watch(procs, deadline, timeout)
        env0 = _env(0, nranks, deadline, env)
        env0[rendezvous.ENV_UID_FD] = str(write_fd)
        procs.append(subprocess.Popen(cmd, env=env0, pass_fds=(write_fd,)))
        os.close(write_fd)
        write_fd = -1
        uid_hex = _read_uid(read_fd, procs[0], deadline)
        for rank in range(1, nranks):
            rank_env = _env(rank, nranks, deadline, env)
            rank_env[rendezvous.ENV_UID] = uid_hex
            procs.append(subprocess.Popen(cmd, env=rank_env))
        return _watch(procs, deadline, timeout)
    except LaunchError as e:
        sys.stderr.write(f"accl.perf: {e}\n")
        return e.code
    except KeyboardInterrupt:
        sys.stderr.write("accl.perf: interrupted; stopping the ranks\n")
        return 130
    finally:
        _stop(procs)
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
