"""Allreduce across 2, 3 and 4 ranks, each its own process, over shared memory and
over sockets (each rank its own NCCL_HOSTID), against NumPy."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import accl

pytestmark = pytest.mark.skipif(accl.query_mode()[0], reason="host arrays need host mode")

DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"]
OPS = ["sum", "prod", "max", "min", "avg"]


# How a rank script of _run_ranks starts: its arguments (NRANKS RANK OUT),
# and the unique id, which rank 0 makes and prints (hex) first and the other
# ranks find in TEST_ACCL_UID.
RANK_PREAMBLE = textwrap.dedent("""
    import os, sys
    import numpy as np
    import accl
    nranks, rank, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    if rank == 0:
        uid = accl.get_unique_id()
        print(uid.hex(), flush=True)
    else:
        uid = bytes.fromhex(os.environ["TEST_ACCL_UID"])
""")

# Each rank reduces the same inputs with each op and saves the results.
RANK_SCRIPT = RANK_PREAMBLE + textwrap.dedent("""
    results = {}
    with accl.Communicator(nranks, uid, rank) as comm:
        assert (comm.rank, comm.size, comm.device) == (rank, nranks, -1)
        for dtype in DTYPES:
            for op in OPS:
                x = ((np.arange(1031) * (rank + 3)) % 5 + 1).astype(dtype)
                try:
                    results[f"{dtype}-{op}"] = comm.allreduce(x, op=op)
                except accl.InvalidUsageError as e:  # refused by every rank alike
                    if "not supported" not in e.last_warning:
                        raise
        y = np.full(100000, rank + 1, dtype=np.float32)
        comm.allreduce(y, y)
        results["inplace"] = y
    np.savez(out, **results)
""").replace("DTYPES", repr(DTYPES)).replace("OPS", repr(OPS))


def _refused_pairs() -> set[str]:
    """(dtype, op) pairs the core refuses as not supported yet, probed on one rank."""
    refused = set()
    with accl.Communicator(1, accl.get_unique_id(), 0) as comm:
        for dtype in DTYPES:
            for op in OPS:
                try:
                    comm.allreduce(np.ones(1, dtype), op=op)
                except accl.InvalidUsageError as e:
                    if "not supported" not in e.last_warning:
                        raise
                    refused.add(f"{dtype}-{op}")
    return refused


def _expected(nranks: int, dtype: str, op: str) -> np.ndarray:
    xs = [((np.arange(1031) * (r + 3)) % 5 + 1).astype(dtype) for r in range(nranks)]
    if op == "sum":
        return np.sum(xs, axis=0, dtype=dtype)
    if op == "prod":
        return np.prod(xs, axis=0, dtype=dtype)
    if op == "max":
        return np.max(xs, axis=0)
    if op == "min":
        return np.min(xs, axis=0)
    total = np.sum(xs, axis=0, dtype=np.int64)
    if np.issubdtype(np.dtype(dtype), np.integer):
        return (total // nranks).astype(dtype)
    return (total / nranks).astype(dtype)


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        raise TimeoutError("rank 0 printed no unique id")
    return proc.stdout.readline().decode().strip()


def _run_ranks(nranks: int, tmp_path, transport: str = "shm", timeout: float = 45.0, rank_env=None,
               logs=None, script: str = RANK_SCRIPT) -> list[str]:
    """Every rank's results file. rank_env: extra variables per rank; logs:
    a list that receives every rank's stderr; script: what each rank runs
    (`python -c script NRANKS RANK OUT`; rank 0 prints the unique id first,
    the others find it in TEST_ACCL_UID)."""
    env = dict(os.environ)
    env.setdefault("NCCL_SOCKET_IFNAME", "lo")
    outs = [str(tmp_path / f"rank{r}.npz") for r in range(nranks)]
    cmd = [sys.executable, "-c", script, str(nranks)]
    def env_of(r):
        e = dict(env, **(rank_env or {}).get(r, {}))
        return dict(e, NCCL_HOSTID=f"host{r}") if transport == "sockets" else e

    procs = [subprocess.Popen(cmd + ["0", outs[0]], env=env_of(0), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)]
    try:
        env["TEST_ACCL_UID"] = _read_line(procs[0], timeout)
        for r in range(1, nranks):
            procs.append(subprocess.Popen(cmd + [str(r), outs[r]], env=env_of(r),
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        deadline = time.monotonic() + timeout
        for r, p in enumerate(procs):
            try:
                _, err = p.communicate(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                pytest.fail(f"rank {r} of {nranks} timed out")
            assert p.returncode == 0, f"rank {r} failed ({p.returncode}):\n{err.decode()}"
            if logs is not None:
                logs.append(err.decode())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return outs


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["shm", "sockets"])
@pytest.mark.parametrize("nranks", [2, 3, 4])
def test_allreduce_across_processes(nranks, transport, tmp_path):
    _check_results(_run_ranks(nranks, tmp_path, transport), nranks)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["shm", "sockets"])
def test_ranks_with_different_algo_and_slots(transport, tmp_path):
    """Rank 0 allows only the ring and asks for 64 KiB slots, rank 1 neither:
    at init both take what both allow (the ring; an exchange on one rank
    against the ring on the other would mix up blocks) and the smaller slots
    (both ends of a FIFO must agree), rank 1 warns, and every result is right."""
    logs = []
    quiet = {"NCCL_DEBUG": "WARN", "NCCL_DEBUG_FILE": ""}  # the WARN on stderr, whatever the outer job sets
    outs = _run_ranks(2, tmp_path, transport, logs=logs, rank_env={
        0: {**quiet, "NCCL_ALGO": "allreduce:ring", "ACCL_CHUNKSIZE": "65536"},
        1: {**quiet, "NCCL_ALGO": "", "ACCL_CHUNKSIZE": "0", "NCCL_BUFFSIZE": "1048576"}})
    _check_results(outs, 2)
    assert "NCCL_ALGO differs between the ranks" in logs[1], logs[1][-3000:]
    assert "NCCL_ALGO differs" not in logs[0], logs[0][-3000:]


def _check_results(outs: list[str], nranks: int) -> None:
    refused = _refused_pairs()
    assert not refused & {"int32-sum", "float32-sum", "float64-max", "int64-min"}
    for rank, path in enumerate(outs):
        got = np.load(path)
        want_keys = {f"{d}-{o}" for d in DTYPES for o in OPS} - refused | {"inplace"}
        assert set(got.files) == want_keys, f"rank {rank}"
        for key in got.files:
            if key == "inplace":
                want = np.full(100000, nranks * (nranks + 1) / 2, dtype=np.float32)
            else:
                dtype, op = key.split("-")
                want = _expected(nranks, dtype, op)
            assert got[key].dtype == want.dtype, key
            if key.endswith("-avg") and want.dtype.kind == "f":
                rtol = 1e-2 if dtype == "float16" else 1e-6
                np.testing.assert_allclose(got[key], want, rtol=rtol, err_msg=f"rank {rank} {key}")
            else:
                np.testing.assert_array_equal(got[key], want, err_msg=f"rank {rank} {key}")


PEER_DIES = textwrap.dedent("""
    import os, sys
    import accl
    comm = accl.Communicator(2, bytes.fromhex(os.environ["TEST_ACCL_UID"]), 1)
    os._exit(0)  # gone without a word, in the middle of the job
""")


@pytest.mark.timeout(60)
def test_dead_peer_becomes_an_error_naming_it():
    uid = accl.get_unique_id()
    env = dict(os.environ, TEST_ACCL_UID=uid.hex())
    env.setdefault("NCCL_SOCKET_IFNAME", "lo")
    peer = subprocess.Popen([sys.executable, "-c", PEER_DIES], env=env)
    try:
        with pytest.raises(accl.NcclError) as info:
            with accl.Communicator(2, uid, 0) as comm:
                assert peer.wait(timeout=30) == 0
                comm.allreduce(np.ones(1 << 16, np.float32))
        assert info.value.code != accl.Result.SUCCESS
        assert "rank 1" in str(info.value)
        assert comm.closed  # aborted by the with block
    finally:
        if peer.poll() is None:
            peer.kill()
        peer.wait()
