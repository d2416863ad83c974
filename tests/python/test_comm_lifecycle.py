"""Communicator lifecycle calls through the Python API, ranks as threads in
host mode: shrink (with and without abort), revoke, grow with joining ranks,
suspend/resume and mem_stats. Results are checked against sums computed here."""
import threading
import traceback

import numpy as np
import pytest

import accl
from accl import InvalidUsageError

from test_collectives import run_ranks


def test_shrink_leaves_out_a_rank_and_keeps_the_order():
    n = 4

    def body(comm):
        if comm.rank == 1:
            return None  # excluded: does not call
        small = comm.shrink([1])
        out = (small.rank, small.size, int(small.allreduce(np.array([comm.rank + 1], np.int64))[0]))
        small.destroy()
        return out

    results = run_ranks(n, body)
    assert results == [(0, 3, 1 + 3 + 4), None, (1, 3, 8), (2, 3, 8)]


def test_revoke_refuses_new_work_and_shrink_with_abort_rebuilds():
    def body(comm):
        comm.revoke()
        with pytest.raises(InvalidUsageError, match="revoked"):
            comm.allreduce(np.ones(4, np.float32))
        fresh = comm.shrink([], abort=True)
        got = fresh.allreduce(np.full(4, comm.rank + 1.0, np.float32))
        fresh.destroy()
        return got.tolist()

    assert run_ranks(3, body) == [[6.0] * 4] * 3


def test_grow_adds_joining_ranks():
    old, new = 2, 4
    grow_uid = {}
    ready = threading.Event()
    results = [None] * new
    failures = []

    def existing(comm):
        if comm.rank == 0:
            grow_uid["uid"] = comm.get_unique_id()
            ready.set()
        ready.wait(30)
        big = comm.grow(new, grow_uid["uid"] if comm.rank == 0 else None)
        results[comm.rank] = (big.rank, big.size, float(big.allreduce(np.array([comm.rank + 1.0]))[0]))
        big.destroy()
        return float(comm.allreduce(np.array([1.0]))[0])  # the old communicator still works

    def joining(rank):
        try:
            ready.wait(30)
            big = accl.Communicator.join(new, grow_uid["uid"], rank)
            results[rank] = (big.rank, big.size, float(big.allreduce(np.array([rank + 1.0]))[0]))
            big.destroy()
        except BaseException:
            failures.append(traceback.format_exc())

    joiners = [threading.Thread(target=joining, args=(r,), daemon=True) for r in range(old, new)]
    for t in joiners:
        t.start()
    assert run_ranks(old, existing) == [2.0, 2.0]
    for t in joiners:
        t.join(60)
    assert not failures, failures
    assert results == [(r, new, 10.0) for r in range(new)]


def test_grow_checks_its_arguments():
    def body(comm):
        with pytest.raises(accl.InvalidArgumentError):
            comm.grow(comm.size, comm.get_unique_id() if comm.rank == 0 else None)  # does not grow
        return True

    assert run_ranks(2, body) == [True, True]
    with pytest.raises(accl.InvalidArgumentError):
        accl.Communicator.join(4, accl.get_unique_id(), 4)  # rank outside [0, 4)


def test_suspend_refuses_work_until_resume():
    def body(comm):
        stats = comm.mem_stats()
        total = stats["total_bytes"]
        assert total == 0 if comm.device < 0 else total > 0  # device mode: the ring's connectors at least
        assert stats == {"suspend_bytes": 0, "suspended": 0, "persist_bytes": total, "total_bytes": total}
        comm.suspend(free_memory=True)
        assert comm.mem_stats()["suspended"] == 1
        with pytest.raises(InvalidUsageError, match="suspended"):
            comm.allreduce(np.ones(2))
        comm.resume()
        with pytest.raises(InvalidUsageError):
            comm.resume()  # not suspended
        return comm.allreduce(np.array([comm.rank + 1.0])).tolist()

    assert run_ranks(2, body) == [[3.0], [3.0]]
