"""Communicator.sendrecv: a send and a receive in one group (MPI_Sendrecv's
shape), checked in C++ for the common case (_accl.sendrecv_fast) and through
accl.group() otherwise. Correctness only: no timing here.
"""

from __future__ import annotations

import numpy as np
import pytest

import accl
from accl import _accl, _group
from test_collectives import run_ranks

HOST_MODE = not accl.query_mode()[0]
pytestmark = pytest.mark.skipif(not HOST_MODE, reason="host arrays need host mode")

N = 3


def block(rank: int, elements: int, dtype=np.float64) -> np.ndarray:
    return ((np.arange(elements) * 7 + rank * 13) % 31 + 1).astype(dtype)


def test_ring_shifts_at_three_ranks():
    # Rank r sends r + 2 elements to r + 1, so every rank receives a count of
    # its own; then the other way round; then a (shape, dtype) receive, which
    # takes the method's general path.
    def body(comm):
        rank, got = comm.rank, {}
        nxt, prev = (rank + 1) % N, (rank - 1) % N
        out = np.zeros(prev + 2)
        assert _accl.sendrecv_fast(comm._comm, block(rank, rank + 2), nxt, out, prev) == 0
        got["fast"] = (out, block(prev, prev + 2))
        out = np.zeros(5, np.int32)
        assert comm.sendrecv(block(rank, 5, np.int32), prev, out, nxt) is out
        got["backwards"] = (out, block(nxt, 5, np.int32))
        made = comm.sendrecv(block(rank, 6), nxt, ((2, 3), np.float64), prev)
        got["allocated"] = (made, block(prev, 6).reshape(2, 3))
        return got

    for rank, got in enumerate(run_ranks(N, body)):
        assert len(got) == 3
        for name, (out, want) in got.items():
            assert out.dtype == want.dtype and out.shape == want.shape, (rank, name)
            np.testing.assert_array_equal(out, want, err_msg=f"rank {rank}: {name}")


def test_to_self_and_inside_a_group(comm1):
    x = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float32)
    assert comm1.sendrecv(x, 0, out, 0) is out
    np.testing.assert_array_equal(out, x)
    out2 = np.zeros(4, np.float32)
    with accl.group() as g:  # queued in the open group, which holds both arrays
        assert comm1.sendrecv(x * 2, 0, out2, 0) is out2
        assert any(o is out2 for o in g._keep) and len(g._keep) >= 2
        np.testing.assert_array_equal(out2, 0)  # nothing ran yet
    np.testing.assert_array_equal(out2, x * 2)
    assert len(_group.open_groups) == 0


def _declined():
    x = np.arange(8, dtype=np.float32)
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    z = np.zeros(8, np.float32)
    return [
        ("send a list", [1.0, 2.0], 0, z, 0),
        ("send strided", np.arange(16, dtype=np.float32)[::2], 0, z, 0),
        ("recv read-only", x, 0, ro, 0),
        ("dtypes differ", x, 0, np.zeros(8, np.float64), 0),
        ("recv is send", x, 0, x, 0),
        ("overlap", x[2:], 0, x[:6], 0),
        ("dest out of range", x, 1, z, 0),
        ("source negative", x, 0, z, -1),
        ("dest not an int", x, 0.0, z, 0),
        ("recv a (shape, dtype) pair", x, 0, ((8,), np.float32), 0),
    ]


@pytest.mark.parametrize("name,send,dest,recv,source", [pytest.param(*c, id=c[0]) for c in _declined()])
def test_fast_path_declines_without_calling(comm1, name, send, dest, recv, source):
    before = np.array(recv, copy=True) if isinstance(recv, np.ndarray) else None
    assert _accl.sendrecv_fast(comm1._comm, send, dest, recv, source) == -1, name
    if before is not None and recv is not send:
        np.testing.assert_array_equal(recv, before)  # untouched: nothing ran


def test_bad_peer_raises_and_leaves_no_group_open(comm1):
    x = np.arange(8, dtype=np.float32)
    with pytest.raises(accl.InvalidArgumentError):
        comm1.sendrecv(x, 1, np.zeros(8, np.float32), 0)
    assert len(_group.open_groups) == 0
    out = np.zeros(8, np.float32)
    comm1.sendrecv(x, 0, out, 0)  # the thread's group was closed: this runs at once
    np.testing.assert_array_equal(out, x)


def test_partly_overlapping_send_and_recv_are_refused(comm1):
    # A partial overlap is a mistake: a ValueError, nothing runs. (The very same
    # buffer is nccl-tests' in-place sendrecv, and runs.)
    x = np.arange(8, dtype=np.float32)
    for recv in (x[2:], x[:4]):
        with pytest.raises(ValueError, match="sendrecv: send and recv overlap"):
            comm1.sendrecv(x, 0, recv, 0)
    np.testing.assert_array_equal(x, np.arange(8, dtype=np.float32))
    assert len(_group.open_groups) == 0
    np.testing.assert_array_equal(comm1.sendrecv(x, 0, x, 0), np.arange(8, dtype=np.float32))


def test_closed_communicator():
    comm = accl.Communicator(1, accl.get_unique_id(), 0)
    comm.destroy()
    x = np.ones(4, np.float32)
    assert _accl.sendrecv_fast(comm._comm, x, 0, np.zeros(4, np.float32), 0) == -1
    with pytest.raises(accl.InvalidUsageError, match="already destroyed or aborted"):
        comm.sendrecv(x, 0, np.zeros(4, np.float32), 0)
