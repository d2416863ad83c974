"""python -m accl.perf for every collective: nccl-tests' size, count, root and
bandwidth columns, results checked on every rank, a wrong result caught,
NCCL's in-place layouts, and --compare against OpenMPI and Gloo."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import accl
from accl.perf import collectives, options

HOST_MODE = not accl.query_mode()[0]
needs_host = pytest.mark.skipif(not HOST_MODE, reason="accl.perf uses host arrays")

# nccl-tests' definitions, written out independently of accl.perf: for the
# swept size S (bytes) of 4-byte floats and n ranks, (size column, count
# column, algbw factor, busbw factor), and whether a root is printed.
NCCL_TESTS = {
    # name: (size bytes(S, n), count(S, n), algbw factor(n), busbw factor(n), rooted)
    "allreduce": (lambda s, n: s, lambda s, n: s // 4, lambda n: 1, lambda n: 2 * (n - 1) / n, False),
    "allgather": (lambda s, n: s // 4 // n * n * 4, lambda s, n: s // 4 // n, lambda n: n,
                  lambda n: (n - 1) / n, False),
    "reducescatter": (lambda s, n: s // 4 // n * n * 4, lambda s, n: s // 4 // n, lambda n: n,
                      lambda n: (n - 1) / n, False),
    "broadcast": (lambda s, n: s, lambda s, n: s // 4, lambda n: 1, lambda n: 1, True),
    "reduce": (lambda s, n: s, lambda s, n: s // 4, lambda n: 1, lambda n: 1, True),
    "alltoall": (lambda s, n: s // 4 // n * n * 4, lambda s, n: s // 4 // n, lambda n: n,
                 lambda n: (n - 1) / n, False),
    "gather": (lambda s, n: s // 4 // n * n * 4, lambda s, n: s // 4 // n, lambda n: n,
               lambda n: (n - 1) / n, True),
    "scatter": (lambda s, n: s // 4 // n * n * 4, lambda s, n: s // 4 // n, lambda n: n,
                lambda n: (n - 1) / n, True),
    "sendrecv": (lambda s, n: s, lambda s, n: s // 4, lambda n: 1, lambda n: 1, False),
}
REDUCING = {"allreduce", "reducescatter", "reduce"}


def _run(*args: str, timeout: float = 110, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "NCCL_SOCKET_IFNAME": "lo", **(env or {})})


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]


def test_every_collective_is_offered():
    assert sorted(collectives.COLLECTIVES) == sorted(NCCL_TESTS)


@needs_host
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(NCCL_TESTS))
def test_table_columns_and_results(name):
    # 3 ranks (blocks of count/3 leave a remainder), root 2, two datatypes
    # (one of them int8, where a misplaced block is most likely to go unseen).
    n, sizes = 3, [100, 6400]
    res = _run("-m", "accl.perf", name, "-np", str(n), "-b", "100", "-e", "6400", "-f", "64",
               "-n", "2", "-w", "1", "-r", "2", "-d", "all" if name not in REDUCING else "int32")
    assert res.returncode == 0, res.stdout + res.stderr
    size_of, count_of, alg, bus, rooted = NCCL_TESTS[name]
    rows = [r for r in _rows(res.stdout) if r[2] == "int32"]
    assert [int(r[0]) for r in rows] == [size_of(s, n) for s in sizes], rows
    for r, s in zip(rows, sizes):
        assert int(r[1]) == count_of(s, n)
        assert r[3] == ("sum" if name in REDUCING else "none")
        assert int(r[4]) == (2 if rooted else -1)
        assert r[8] == "0", r
        assert r[12] == ("N/A" if name == "sendrecv" else "0"), r  # nccl-tests: sendrecv in place unchecked
        for t, algbw, busbw in (r[5:8], r[9:12]):
            want_alg = count_of(s, n) * 4 * alg(n) / 1e3 / float(t)  # us -> GB/s
            assert float(algbw) == pytest.approx(want_alg, rel=0.02, abs=0.011)
            assert float(busbw) == pytest.approx(float(algbw) * bus(n), rel=0.02, abs=0.011)
    if name not in REDUCING:  # -d all: every type, each checked
        every = _rows(res.stdout)
        assert len(every) == 2 * len(options.DATATYPES) and all(r[8] == "0" for r in every), every
    assert "# Out of bounds values : 0 OK" in res.stdout


# Elements a rank must hold after the call, at 2 ranks and 24 floats (96 B).
DEFINED_AT_96B = {"allreduce": 48, "allgather": 48, "reducescatter": 24, "broadcast": 48,
                  "reduce": 24, "alltoall": 48, "gather": 24, "scatter": 24, "sendrecv": 48}


@needs_host
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(NCCL_TESTS))
def test_wrong_results_are_counted(tmp_path, name):
    """A corrupted result shows in #wrong and fails the run, for every element
    the call defines (rooted calls: the root's only). (This was
    test_tools.py's allreduce-only test_perf_reports_wrong_values_and_fails.)"""
    script = tmp_path / "corrupt_perf.py"
    script.write_text(textwrap.dedent("""
        import sys
        import accl.perf.data as data
        from accl.perf import launcher, options, rendezvous, worker
        count_wrong = data.count_wrong
        data.count_wrong = lambda got, want, op: count_wrong(got + 1, want, op)
        opts = options.parse(sys.argv[1:])
        me = rendezvous.identity()
        if me is None:
            sys.exit(launcher.launch(sys.argv[1:], opts.nranks, opts.timeout,
                                     command=[sys.executable, __file__]))
        sys.exit(worker.run(opts, me))
    """))
    res = _run(str(script), name, "-np", "2", "-b", "96", "-e", "96", "-n", "1", "-w", "0")
    assert res.returncode == 1, res.stdout + res.stderr
    row = _rows(res.stdout)[0]
    want = str(DEFINED_AT_96B[name])
    assert row[8] == want and row[12] == ("N/A" if name == "sendrecv" else want), row
    failed_columns = 1 if name == "sendrecv" else 2  # out of place, in place
    assert f"# Out of bounds values : {failed_columns} FAILED" in res.stdout


@pytest.mark.parametrize("name", sorted(NCCL_TESTS))
def test_in_place_buffers_follow_nccl_layout(name):
    """In place, send and recv are views of one buffer: send at recv + rank *
    count for allgather and gather, recv at send + rank * count for
    reducescatter and scatter, the very same array otherwise."""
    coll, n, rank = collectives.COLLECTIVES[name], 4, 3
    c = coll.counts(100, n)  # 25 per rank where split
    send, recv = collectives.buffers(c, rank, np.dtype(np.float32), True)
    def addr(a):
        return a.__array_interface__["data"][0]

    base = addr(send if name in ("reducescatter", "scatter") else recv)
    if name in ("allgather", "gather"):
        assert (send.size, recv.size) == (25, 100)
        assert addr(send) == base + rank * 25 * 4
    elif name in ("reducescatter", "scatter"):
        assert (send.size, recv.size) == (100, 25)
        assert addr(recv) == base + rank * 25 * 4
    else:
        assert send is recv and send.size == 100
    oop_send, oop_recv = collectives.buffers(c, rank, np.dtype(np.float32), False)
    assert not np.may_share_memory(oop_send, oop_recv)


@pytest.mark.parametrize("name", sorted(NCCL_TESTS))
def test_sizes_share_one_arena(name):
    """As nccl-tests, a sweep allocates its buffers once, at its largest size
    (collectives.arena): every size's buffers, in place and out of place, are
    views at the start of the arena's send and receive buffers, never past
    their end, and out of place the two never overlap."""
    coll, n, rank = collectives.COLLECTIVES[name], 4, 3
    dtype = np.dtype(np.float32)
    largest = 4096
    arena = collectives.arena(largest)
    assert [a.nbytes for a in arena] == [largest, largest]

    def inside(view, buf):
        lo = view.__array_interface__["data"][0] - buf.__array_interface__["data"][0]
        return 0 <= lo and lo + view.nbytes <= buf.nbytes

    for size in (64, 1024, largest):
        c = coll.counts(size // dtype.itemsize, n)
        send, recv = collectives.buffers(c, rank, dtype, False, arena)
        assert inside(send, arena[0]) and inside(recv, arena[1]), size
        assert send.__array_interface__["data"][0] == arena[0].__array_interface__["data"][0]
        assert not np.may_share_memory(send, recv)
        ip_send, ip_recv = collectives.buffers(c, rank, dtype, True, arena)
        assert inside(ip_send, arena[1]) and inside(ip_recv, arena[1]), size


@needs_host
@pytest.mark.timeout(60)
def test_root_must_be_a_rank():
    res = _run("-m", "accl.perf", "gather", "-np", "2", "-b", "64", "-e", "64", "-r", "2")
    assert res.returncode != 0
    assert "accl.perf: -r 2: the root must be a rank, 0 to 1" in res.stderr, res.stderr
    res = _run("-m", "accl.perf", "gather", "-r", "-1")
    assert res.returncode == 2 and "-r must be a rank" in res.stderr


HAVE = {
    "mpi": importlib.util.find_spec("mpi4py") is not None and shutil.which("mpirun") is not None,
    "gloo": importlib.util.find_spec("torch") is not None,
}
# Which of ACCL's times each peer's call is compared with (in place: the
# peer's call works in place).
PEER_IN_PLACE = {"mpi": {"broadcast"}, "gloo": {"allreduce", "broadcast", "reduce"}}


@needs_host
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(NCCL_TESTS))
def test_compare_peers_run_and_check_every_collective(tmp_path, name):
    peers = [p for p in ("mpi", "gloo") if HAVE[p]]
    if not peers:
        pytest.skip("neither mpi4py with mpirun nor torch is installed")
    out_json = tmp_path / "out.json"
    res = _run("-m", "accl.perf", name, "-np", "2", "-b", "4K", "-e", "4K", "-n", "2", "-w", "1",
               "-r", "1", "--compare", ",".join(peers), "-J", str(out_json))
    assert res.returncode == 0, res.stdout + res.stderr
    for p in peers:
        if f"# {p}: not available (" in res.stdout:
            pytest.skip(f"{p} is installed but could not run here: {res.stdout}")
        place = "in-place" if name in PEER_IN_PLACE[p] else "out-of-place"
        assert f"'x {p}' = {p} time / ACCL {place} time" in res.stdout, res.stdout
    rec = json.loads(out_json.read_text())["rows"][0]
    for p in peers:
        assert f"{p}_wrong" not in rec, rec  # the peer's own result was checked, and right
        ours = rec["ip_time_us"] if name in PEER_IN_PLACE[p] else rec["time_us"]
        assert rec[f"{p}_time_us"] > 0
        assert rec[f"x_{p}"] == pytest.approx(rec[f"{p}_time_us"] / ours)
