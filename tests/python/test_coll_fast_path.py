"""The fast path of broadcast, reduce, allgather, reduce_scatter, alltoall,
gather, scatter, send and recv (_accl.coll_fast, python/src/coll_py.cpp).

Like allreduce's (test_allreduce_fast_path.py): it must run exactly calls the
methods would run unchanged, with the same results, and decline everything
else with -1 before calling the library, so that the method's own checks give
their documented result or error. Correctness only: no timing here.
"""

from __future__ import annotations

import numpy as np
import pytest

import accl
from accl import _accl, _group
from test_collectives import run_ranks

HOST_MODE = not accl.query_mode()[0]
pytestmark = pytest.mark.skipif(not HOST_MODE, reason="host arrays need host mode")

BCAST, REDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, GATHER, SCATTER, SEND, RECV = range(1, 10)
N, ROOT, COUNT = 3, 1, 5


def fast(comm, kind, send, recv, op=None, root=0) -> int:
    return _accl.coll_fast(kind, comm._comm, send, recv, op, root)


def inputs(rank: int, elements: int) -> np.ndarray:
    return (np.arange(elements) * 7 + rank * 13) % 31 + 1


def _calls(rank: int):
    """(name, kind, send, recv, op, root, expected recv or None) for one rank:
    out of place and NCCL's in-place layouts, root ROOT."""
    n, c = N, COUNT
    block = inputs(rank, c).astype(np.int32)
    blocks = inputs(rank, n * c).astype(np.int32)
    every = [inputs(k, c).astype(np.int32) for k in range(n)]  # rank k's block
    every_blocks = [inputs(k, n * c).astype(np.int32) for k in range(n)]
    summed = sum(every_blocks)
    out = []
    out.append(("allgather", ALLGATHER, block, np.zeros(n * c, np.int32), None, 0, np.concatenate(every)))
    buf = np.zeros(n * c, np.int32)
    buf[rank * c:(rank + 1) * c] = block
    out.append(("allgather in place", ALLGATHER, buf[rank * c:(rank + 1) * c], buf, None, 0,
                np.concatenate(every)))
    out.append(("reduce_scatter", REDUCESCATTER, blocks, np.zeros(c, np.int32), "sum", 0,
                summed[rank * c:(rank + 1) * c]))
    buf = blocks.copy()
    out.append(("reduce_scatter in place", REDUCESCATTER, buf, buf[rank * c:(rank + 1) * c], "max", 0,
                np.maximum.reduce(every_blocks)[rank * c:(rank + 1) * c]))
    want = np.concatenate([eb[rank * c:(rank + 1) * c] for eb in every_blocks])
    out.append(("alltoall", ALLTOALL, blocks, np.zeros(n * c, np.int32), None, 0, want))
    buf = blocks.copy()
    out.append(("alltoall in place", ALLTOALL, buf, buf, None, 0, want))
    out.append(("broadcast", BCAST, block, np.zeros(c, np.int32), None, ROOT, every[ROOT]))
    buf = block.copy()
    out.append(("broadcast in place", BCAST, buf, buf, None, ROOT, every[ROOT]))
    out.append(("broadcast, no send off the root", BCAST, block if rank == ROOT else None,
                np.zeros(c, np.int32), None, ROOT, every[ROOT]))
    out.append(("reduce", REDUCE, block, np.zeros(c, np.int32), "prod", ROOT,
                np.prod(every, axis=0) if rank == ROOT else None))
    buf = block.copy()
    out.append(("reduce in place", REDUCE, buf, buf, "sum", ROOT, sum(every) if rank == ROOT else None))
    out.append(("gather", GATHER, block, np.zeros(n * c, np.int32) if rank == ROOT else None, None, ROOT,
                np.concatenate(every) if rank == ROOT else None))
    buf = np.zeros(n * c, np.int32)
    buf[rank * c:(rank + 1) * c] = block
    send = buf[rank * c:(rank + 1) * c] if rank == ROOT else block
    out.append(("gather in place", GATHER, send, buf, None, ROOT, np.concatenate(every) if rank == ROOT else None))
    out.append(("scatter", SCATTER, blocks, np.zeros(c, np.int32), None, ROOT,
                every_blocks[ROOT][rank * c:(rank + 1) * c]))
    out.append(("scatter, no send off the root", SCATTER, blocks if rank == ROOT else None,
                np.zeros(c, np.int32), None, ROOT, every_blocks[ROOT][rank * c:(rank + 1) * c]))
    buf = blocks.copy()
    recv = buf[rank * c:(rank + 1) * c] if rank == ROOT else np.zeros(c, np.int32)
    out.append(("scatter in place", SCATTER, buf, recv, None, ROOT, every_blocks[ROOT][rank * c:(rank + 1) * c]))
    return out


def test_fast_path_runs_every_call_right_at_three_ranks():
    def body(comm):
        rank, results = comm.rank, {}
        for name, kind, send, recv, op, root, want in _calls(rank):
            assert fast(comm, kind, send, recv, op, root) == 0, (rank, name)
            results[name] = (recv, want)
        # send and recv, a ring shift in a group (both through the fast path)
        # The arrays outlive the group: queued calls read them at its end
        # (the methods' group holds them; these direct calls bypass it).
        mine, got = inputs(rank, COUNT).astype(np.float64), np.zeros(COUNT, np.float64)
        with accl.group():
            assert fast(comm, SEND, mine, None, None, (rank + 1) % N) == 0
            assert fast(comm, RECV, None, got, None, (rank - 1) % N) == 0
        results["send/recv"] = (got, inputs((rank - 1) % N, COUNT).astype(np.float64))
        return results

    for rank, results in enumerate(run_ranks(N, body)):
        assert len(results) == len(_calls(0)) + 1
        for name, (got, want) in results.items():
            if want is not None:
                np.testing.assert_array_equal(got, want, err_msg=f"rank {rank}: {name}")


def _declined():
    """(name, kind, send, recv, op, root): calls the fast path leaves to the methods."""
    x = np.arange(8, dtype=np.float32)
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    z = np.zeros(8, np.float32)
    return [
        ("allreduce kind", 0, x, z, "sum", 0),
        ("unknown kind", 10, x, z, None, 0),
        ("root not an int", BCAST, x, z, None, 0.0),
        ("root None", GATHER, x, z, None, None),
        ("peer huge", SEND, x, None, None, 2 ** 40),
        ("reduce op unknown", REDUCE, x, z, "mean", 0),
        ("reduce PreMulSum-like op", REDUCE, x, z, object(), 0),
        ("broadcast recv None", BCAST, x, None, None, 0),
        ("broadcast send None at the root", BCAST, None, z, None, 0),
        ("broadcast size mismatch", BCAST, x, np.zeros(7, np.float32), None, 0),
        ("broadcast overlap", BCAST, x[1:], x[:7], None, 0),
        ("broadcast read-only in place", BCAST, ro, ro, None, 0),
        ("reduce dtype mismatch", REDUCE, x, np.zeros(8, np.float64), "sum", 0),
        ("reduce read-only recv", REDUCE, x, ro, "sum", 0),
        ("allgather recv is send", ALLGATHER, x, x, None, 0),
        ("allgather recv too small", ALLGATHER, x, np.zeros(4, np.float32), None, 0),
        ("allgather overlap not at the rank's block", ALLGATHER, x[1:3], x[:2], None, 0),
        ("reduce_scatter recv too large", REDUCESCATTER, x, np.zeros(9, np.float32), "sum", 0),
        ("reduce_scatter recv is send", REDUCESCATTER, x, x, "sum", 0),
        ("alltoall size mismatch", ALLTOALL, x, np.zeros(4, np.float32), None, 0),
        ("alltoall overlap", ALLTOALL, x[2:], x[:6], None, 0),
        ("gather recv None at the root", GATHER, x, None, None, 0),
        ("gather recv is send", GATHER, x, x, None, 0),
        ("scatter send None at the root", SCATTER, None, z, None, 0),
        ("scatter recv too small", SCATTER, x, np.zeros(4, np.float32), None, 0),
        ("send list", SEND, [1.0, 2.0], None, None, 0),
        ("send strided", SEND, np.arange(16, dtype=np.float32)[::2], None, None, 0),
        ("send big endian", SEND, np.zeros(4, ">f4"), None, None, 0),
        ("recv a (shape, dtype) pair", RECV, None, ((4,), np.float32), None, 0),
        ("recv read-only", RECV, None, ro, None, 0),
        ("recv int16", RECV, None, np.zeros(4, np.int16), None, 0),
    ]


@pytest.mark.parametrize("name,kind,send,recv,op,root", [pytest.param(*c, id=c[0]) for c in _declined()])
def test_fast_path_declines_without_calling(comm1, name, kind, send, recv, op, root):
    before = np.array(recv, copy=True) if isinstance(recv, np.ndarray) else None
    assert fast(comm1, kind, send, recv, op, root) == -1, name
    if before is not None and recv is not send:
        np.testing.assert_array_equal(recv, before)  # untouched: nothing ran


def test_declined_calls_behave_as_documented(comm1):
    x = np.arange(8, dtype=np.float32)
    with pytest.raises(ValueError, match="7 elements, 8 needed"):
        comm1.broadcast(x, np.zeros(7, np.float32))
    with pytest.raises(ValueError, match="in-place layout"):
        comm1.allgather(x[1:3], x[:2])
    with pytest.raises(ValueError, match="dtype"):
        comm1.alltoall(x, np.zeros(8, np.int32))
    with pytest.raises(ValueError, match="send is None at the root"):
        comm1.scatter(None, np.zeros(8, np.float32))
    np.testing.assert_array_equal(comm1.gather(x), x.reshape(1, 8))  # allocates: the method's path
    np.testing.assert_array_equal(comm1.reduce(x, op=accl.RedOp.MAX), x)
    with pytest.raises(accl.InvalidArgumentError):
        comm1.broadcast(x, np.zeros(8, np.float32), root=3)  # the library's check, through the fast path


def test_fast_path_returns_the_documented_objects(comm1):
    x = np.arange(6, dtype=np.int32)
    out = np.empty(6, np.int32)
    assert comm1.broadcast(x, out) is out
    assert comm1.broadcast(x, x) is x
    assert comm1.reduce(x, out, "sum", 0) is out
    assert comm1.allgather(x, out) is out
    assert comm1.reduce_scatter(x, out) is out
    assert comm1.alltoall(x, x) is x
    assert comm1.gather(x, out, 0) is out
    assert comm1.scatter(x, out, 0) is out
    with accl.group():
        assert comm1.send(x, 0) is None
        got = comm1.recv(out, 0)
    assert got is out
    np.testing.assert_array_equal(out, x)


def test_fast_path_in_a_group_holds_the_arrays(comm1):
    x = np.full(5, 3.0)
    out = np.zeros(5)
    with accl.group() as g:
        comm1.send(x, 0)
        comm1.recv(out, 0)
        assert any(o is x for o in g._keep) and any(o is out for o in g._keep)
    np.testing.assert_array_equal(out, x)
    assert len(_group.open_groups) == 0


def test_closed_communicator_declines_then_raises():
    comm = accl.Communicator(1, accl.get_unique_id(), 0)
    comm.destroy()
    x = np.ones(4, np.float32)
    assert fast(comm, BCAST, x, np.zeros(4, np.float32)) == -1
    with pytest.raises(accl.InvalidUsageError, match="already destroyed or aborted"):
        comm.broadcast(x, np.zeros(4, np.float32))
