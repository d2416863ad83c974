"""Sends that go straight from the sender's buffer into the receiver's
(ACCL_P2P_DIRECT, coll/p2p.cc "Pulled sends"): ranks as threads of this
process and as processes of this host (cross memory attach), against values
computed apart from the library (p2p_patterns.py), with the INFO line that
says the path was taken; the same patterns through the slots
(ACCL_P2P_DIRECT=0) for comparison; and a size mismatch that fails cleanly.
"""
from __future__ import annotations

import ctypes
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import accl
import p2p_patterns
from test_collectives import run_ranks
from test_multiprocess import RANK_PREAMBLE, _run_ranks

pytestmark = pytest.mark.skipif(accl.query_mode()[0], reason="host arrays need host mode")

HERE = Path(__file__).parent
STRAIGHT = "goes straight from buffer to buffer"
N = 3
# Set: with more ranks than CPUs (CI's 2), the default waits for 4 MiB.
MIN_BYTES = "65536"

RANK_SCRIPT = RANK_PREAMBLE + textwrap.dedent("""
    sys.path.insert(0, os.environ["TEST_PATTERNS_DIR"])
    import p2p_patterns
    comm = accl.Communicator(nranks, uid, rank)
    got = p2p_patterns.run(comm)
    error = p2p_patterns.mismatch(comm)
    comm.abort()
    arrays = {}
    for k, (g, w) in got.items():
        arrays["got " + k], arrays["want " + k] = g, w
    np.savez(out, error=np.array(error), **arrays)
""")


def check(results: dict, rank: int) -> None:
    names = [k[4:] for k in results if k.startswith("got ")]
    assert "ring" in names and "alltoall" in names, names
    for name in names:
        got, want = results["got " + name], results["want " + name]
        assert got.dtype == want.dtype and got.shape == want.shape, (rank, name)
        np.testing.assert_array_equal(got, want, err_msg=f"rank {rank}: {name}")


def check_mismatch(errors: list[str], straight: bool) -> None:
    """Rank 1 names the sizes (whole, where rank 0's message came straight;
    else its last slot's); rank 0, whose straight send waits for rank 1,
    learns of rank 1's failure (through the slots, its send may end first);
    rank 2 was idle."""
    assert errors[1].startswith("InvalidUsageError") and "were expected" in errors[1], errors[1]
    sizes = (p2p_patterns.COUNT * 4, (p2p_patterns.COUNT + 1) * 4) if straight else (12, 16)
    assert f"sent {sizes[0]} bytes where {sizes[1]} were expected" in errors[1], errors[1]
    if straight or errors[0] != "no error":
        assert errors[0].startswith("RemoteError") and "rank 1" in errors[0], errors[0]
    assert errors[2] == "idle"


# Where the ranks are: every rank's extra environment.
LAYOUTS = {
    "one_host": {},
    # ranks 0 and 1 share a host, rank 2 is on another (sockets)
    "two_hosts": {0: {"NCCL_HOSTID": "hostA"}, 1: {"NCCL_HOSTID": "hostA"}, 2: {"NCCL_HOSTID": "hostB"}},
    # one host with no direct collectives: the pairs find their reach themselves
    "no_direct_collectives": {r: {"ACCL_DIRECT": "0"} for r in range(N)},
    # and rank 1 refuses cross memory attach: only ranks 0 and 2 reach each other
    "cma_off_on_rank_1": {r: {"ACCL_DIRECT": "0", **({"ACCL_CMA": "0"} if r == 1 else {})} for r in range(N)},
}


def spawn(tmp_path: Path, direct: str, monkeypatch, layout: str = "one_host") -> tuple[list[dict], list[str]]:
    """The patterns on N processes: each rank's results and stderr."""
    for k, v in dict(TEST_PATTERNS_DIR=str(HERE), ACCL_P2P_DIRECT=direct, ACCL_P2P_DIRECT_MIN_BYTES=MIN_BYTES,
                     NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,COLL").items():
        monkeypatch.setenv(k, v)
    logs: list[str] = []
    outs = _run_ranks(N, tmp_path, timeout=60.0, logs=logs, script=RANK_SCRIPT, rank_env=LAYOUTS[layout])
    return [dict(np.load(o)) for o in outs], logs


@pytest.mark.timeout(90)
@pytest.mark.parametrize("direct, layout", [("1", "one_host"), ("0", "one_host"), ("1", "two_hosts"),
                                            ("1", "no_direct_collectives"), ("1", "cma_off_on_rank_1")],
                         ids=["straight", "slots", "straight-two_hosts", "straight-no_direct_collectives",
                              "straight-cma_off_on_rank_1"])
def test_large_sends_between_processes(tmp_path, monkeypatch, direct, layout):
    results, logs = spawn(tmp_path, direct, monkeypatch, layout)
    unreached = "direct collectives on any buffer" not in logs[0] if layout == "one_host" else \
        "sends straight between buffers reach 0 of" in logs[0]
    if direct == "1" and unreached:
        pytest.skip("these processes cannot reach each other's memory (cross memory attach: ptrace's rules)")
    for rank, res in enumerate(results):
        check(res, rank)
    pair01 = direct == "1" and layout != "cma_off_on_rank_1"  # rank 0's sends to rank 1 go straight
    check_mismatch([str(res["error"]) for res in results], pair01)
    straight = [r for r, log in enumerate(logs) if STRAIGHT in log]
    if direct == "0":
        assert not straight
    elif layout == "cma_off_on_rank_1":  # 2 -> 0 in the ring, 0 -> 2 in all-to-all
        assert straight == [0, 2], logs
        assert "reach 1 of the 2" in logs[0] and "reach 1 of the 2" in logs[2], logs
        assert "reach 0 of the 2" in logs[1] and "ACCL_CMA=0" in logs[1], logs[1]
    elif layout == "two_hosts":  # only the pair on hostA: rank 2 reaches the others through sockets
        assert straight == [0, 1], logs
        assert all("through cross memory attach" in logs[r] for r in straight), logs
        assert "reach 1 of the 1" in logs[1] and "ranks of this host in other processes" in logs[1], logs[1]
        assert "sends straight between buffers reach" not in logs[2], logs[2]  # alone on its host
    else:  # every rank sends in the ring
        assert straight == list(range(N)), logs
        assert all("through cross memory attach" in log for log in logs), logs


@pytest.fixture
def params(monkeypatch):
    """Sets library parameters for this test (read again at once) and
    restores the others' afterwards."""
    lib = ctypes.CDLL(accl.library_path())

    def set_params(**values: str) -> None:
        for k, v in values.items():
            monkeypatch.setenv(k, v)
        lib.ncclResetDebugInit()

    yield set_params
    monkeypatch.undo()
    lib.ncclResetDebugInit()


@pytest.fixture
def debug_log(tmp_path, monkeypatch):
    """This process's INFO lines of the COLL subsystem, in a file."""
    log = tmp_path / "debug.log"
    lib = ctypes.CDLL(accl.library_path())
    for k, v in {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "COLL", "NCCL_DEBUG_FILE": str(log)}.items():
        monkeypatch.setenv(k, v)
    lib.ncclResetDebugInit()
    yield log
    monkeypatch.undo()
    lib.ncclResetDebugInit()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("direct", ["1", "0"], ids=["straight", "slots"])
def test_large_sends_between_threads(debug_log, params, direct):
    params(ACCL_P2P_DIRECT=direct, ACCL_P2P_DIRECT_MIN_BYTES=MIN_BYTES)

    def body(comm):
        got = p2p_patterns.run(comm)
        return got, p2p_patterns.mismatch(comm)

    results = run_ranks(N, body)
    for rank, (got, _) in enumerate(results):
        check({**{"got " + k: g for k, (g, _) in got.items()}, **{"want " + k: w for k, (_, w) in got.items()}},
              rank)
    check_mismatch([error for _, error in results], direct == "1")
    text = debug_log.read_text() if debug_log.exists() else ""
    if direct == "1":
        assert text.count(STRAIGHT) == N and text.count("a rank of this process") == N, text
    else:
        assert STRAIGHT not in text


@pytest.mark.timeout(60)
def test_a_sender_aborted_mid_message_fails_every_rank_cleanly(params):
    # Rank 1 takes rank 0's 64 MiB straight into the buffer it also sends to
    # rank 2, which comes 1 s late: rank 1 reads the first chunks, then waits
    # for its own send. Rank 0 is aborted meanwhile (its call takes back the
    # chunks rank 1 has not taken and waits for one in flight) and frees its
    # buffer as soon as the call returns; rank 1 must notice and stop (a read
    # of the freed memory would crash this process), and every rank fails.
    # Both ends settle here, which once made rank 0 wait forever. (A read in
    # the microseconds between rank 0's return and rank 1 noticing the abort
    # is not forced: rank 1 is waiting then.) A first small group makes the
    # connections, so that rank 1 is in the middle of the message, not
    # making them, when rank 0 fails.
    params(ACCL_P2P_DIRECT_MIN_BYTES=MIN_BYTES)
    count = 16 << 20

    def body(comm):
        one = np.zeros(1, np.int32)
        with accl.group():
            if comm.rank < 2:
                comm.send(one, comm.rank + 1)
            if comm.rank > 0:
                comm.recv(np.zeros(1, np.int32), comm.rank - 1)
        try:
            if comm.rank == 0:
                x = np.ones(count, np.int32)
                threading.Timer(0.3, comm.abort).start()
                try:
                    comm.send(x, 1)
                finally:
                    del x  # 64 MiB: unmapped at once
            elif comm.rank == 1:
                buf = np.zeros(count, np.int32)
                with accl.group():
                    comm.recv(buf, 0)
                    comm.send(buf, 2)
            else:
                time.sleep(1.0)
                comm.recv(np.zeros(count, np.int32), 1)
        except accl.NcclError as e:
            return type(e).__name__
        return "no error"

    errors = run_ranks(N, body)
    assert errors[0] != "no error" and errors[1] == "RemoteError" and errors[2] != "no error", errors
