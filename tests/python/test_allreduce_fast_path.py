"""Communicator.allreduce's fast path (_accl.all_reduce_fast, python/src/coll_py.cpp).

The fast path must run exactly the calls the general path (communicator.py)
would run unchanged, with the same result, and decline everything else with
-1 before calling the library, so that the general path gives its documented
result or error. Correctness only: no timing here.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import accl
from accl import _accl, _group

HOST_MODE = not accl.query_mode()[0]
pytestmark = pytest.mark.skipif(not HOST_MODE, reason="host arrays need host mode")

NATIVE_DTYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64,
                 np.float16, np.float32, np.float64, np.intc, np.longlong, np.ulonglong]


def fast(comm, send, recv, op="sum") -> int:
    return _accl.all_reduce_fast(comm._comm, send, recv, op)


@pytest.mark.parametrize("dtype", NATIVE_DTYPES, ids=lambda d: np.dtype(d).char)
def test_fast_path_runs_the_common_calls(comm1, dtype):
    x = (np.arange(12) % 5 + 1).astype(dtype).reshape(3, 4)
    for op in ["sum", "prod", "max", "min", "avg", accl.RedOp.MAX, 0]:
        out = np.zeros_like(x)
        assert fast(comm1, x, out, op) == 0
        np.testing.assert_array_equal(out, x)  # one rank: every op is the identity
        y = x.copy()
        assert fast(comm1, y, y, op) == 0  # in place
        np.testing.assert_array_equal(y, x)
    flat = np.zeros(12, dtype)
    assert fast(comm1, x, flat) == 0  # same size, other shape
    np.testing.assert_array_equal(flat, x.reshape(-1))
    ro = x.copy()
    ro.flags.writeable = False
    assert fast(comm1, ro, np.zeros_like(x)) == 0  # a read-only send is fine


def test_fast_path_edge_shapes_and_views(comm1):
    x = np.arange(8, dtype=np.float32)
    assert fast(comm1, x, x[:]) == 0  # another view starting at send: NCCL's in-place layout
    assert fast(comm1, np.zeros(0, np.int32), np.zeros(0, np.int32)) == 0
    s, r = np.array(2.5), np.array(0.0)
    assert fast(comm1, s, r) == 0 and r == 2.5
    buf = np.arange(16, dtype=np.int64)
    assert fast(comm1, buf[:8], buf[8:]) == 0  # adjacent, not overlapping
    np.testing.assert_array_equal(buf[8:], np.arange(8))


class _Sub(np.ndarray):
    pass


def _declined_cases():
    """(name, send, recv, op): calls the fast path must leave to the general path."""
    x = np.arange(8, dtype=np.float32)
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    cases = [
        ("None send", None, np.zeros(2), "sum"),
        ("list send", [1.0, 2.0], np.zeros(2), "sum"),
        ("subclass send", x.view(_Sub), np.zeros(8, np.float32), "sum"),
        ("subclass recv", x, np.zeros(8, np.float32).view(_Sub), "sum"),
        ("strided send", np.arange(16, dtype=np.float32)[::2], np.zeros(8, np.float32), "sum"),
        ("strided recv", x, np.zeros(16, np.float32)[::2], "sum"),
        ("fortran send", np.asfortranarray(np.ones((2, 4), np.float32)), np.zeros(8, np.float32),
         "sum"),
        ("read-only recv", x, ro, "sum"),
        ("read-only in place", ro, ro, "sum"),
        ("dtype mismatch", x, np.zeros(8, np.float64), "sum"),
        ("same width, other dtype", x, np.zeros(8, np.int32), "sum"),
        ("size mismatch", x, np.zeros(7, np.float32), "sum"),
        ("overlap", x[1:], x[:7], "sum"),
        ("big endian", np.zeros(4, ">f4"), np.zeros(4, ">f4"), "sum"),
        ("bool", np.zeros(4, bool), np.zeros(4, bool), "sum"),
        ("int16", np.zeros(4, np.int16), np.zeros(4, np.int16), "sum"),
        ("complex", np.zeros(4, np.complex64), np.zeros(4, np.complex64), "sum"),
        ("recv None", x, None, "sum"),
        ("op upper case", x, np.zeros(8, np.float32), "SUM"),
        ("op unknown name", x, np.zeros(8, np.float32), "mean"),
        ("op out of range", x, np.zeros(8, np.float32), 17),
        ("op negative", x, np.zeros(8, np.float32), -1),
        ("op huge", x, np.zeros(8, np.float32), 2 ** 70),
        ("op float", x, np.zeros(8, np.float32), 1.0),
        ("op None", x, np.zeros(8, np.float32), None),
    ]
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - a dependency of accl
        return cases
    bf = np.ones(4, ml_dtypes.bfloat16)
    return cases + [("bfloat16", bf, np.zeros_like(bf), "sum")]


@pytest.mark.parametrize("name,send,recv,op",
                         [pytest.param(*case, id=case[0]) for case in _declined_cases()])
def test_fast_path_declines_without_calling(comm1, name, send, recv, op):
    before = None if recv is None else np.array(recv, copy=True)
    assert fast(comm1, send, recv, op) == -1, name
    if recv is not None and recv is not send:
        np.testing.assert_array_equal(recv, before)  # untouched: nothing ran


def test_declined_calls_behave_as_documented(comm1):
    x = np.arange(8, dtype=np.float32)
    sub = comm1.allreduce(x.view(_Sub))  # as before: the result of np.asarray(send)'s path
    assert type(sub) is np.ndarray
    np.testing.assert_array_equal(sub, x)
    np.testing.assert_array_equal(comm1.allreduce([1.0, 2.0]), [1.0, 2.0])
    with pytest.raises(TypeError, match="NCCL datatype"):
        comm1.allreduce(None)
    np.testing.assert_array_equal(comm1.allreduce(x, op="SUM"), x)
    with pytest.raises(ValueError, match="in-place layout"):
        comm1.allreduce(x[1:], x[:7])
    with pytest.raises(ValueError, match="dtype"):
        comm1.allreduce(x, np.zeros(8, np.int32))
    with pytest.raises(TypeError, match="native byte order"):
        comm1.allreduce(np.zeros(4, ">f4"))
    with pytest.raises(TypeError, match="NCCL datatype"):
        comm1.allreduce(np.zeros(4, np.int16))
    with pytest.raises(ValueError, match="reduction op"):
        comm1.allreduce(x, op=-1)
    with pytest.raises(TypeError, match="numpy.ndarray"):
        comm1.allreduce(x, [0.0] * 8)
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        comm1.allreduce(ro, ro)
    with comm1.premul_sum(2.0, np.float32) as half:  # PreMulSum: general path
        np.testing.assert_array_equal(comm1.allreduce(x, op=half), 2 * x)


def test_closed_communicator_declines_then_raises():
    comm = accl.Communicator(1, accl.get_unique_id(), 0)
    comm.destroy()
    x = np.ones(4, np.float32)
    assert fast(comm, x, np.zeros(4, np.float32)) == -1
    with pytest.raises(accl.InvalidUsageError, match="already destroyed or aborted"):
        comm.allreduce(x, np.zeros(4, np.float32))


def test_fast_path_returns_the_documented_objects(comm1):
    x = np.arange(6, dtype=np.int32)
    out = np.empty(6, np.int32)
    assert comm1.allreduce(x, out) is out
    assert comm1.allreduce(x, x) is x
    new = comm1.allreduce(x.reshape(2, 3))
    assert new.shape == (2, 3) and new.flags.c_contiguous
    np.testing.assert_array_equal(new.reshape(-1), x)


def test_fast_path_in_a_group_holds_the_arrays(comm1):
    x = np.full(5, 3.0)
    with accl.group() as g:
        assert len(_group.open_groups) >= 1
        out = comm1.allreduce(x)
        assert any(o is x for o in g._keep) and any(o is out for o in g._keep)
    np.testing.assert_array_equal(out, x)
    assert len(_group.open_groups) == 0


def test_non_blocking_communicator_through_the_fast_path():
    with accl.Communicator(1, accl.get_unique_id(), 0, config={"blocking": 0}) as comm:
        x = np.arange(1000, dtype=np.float64)
        out = comm.allreduce(x)  # returns only once done, also when queued (7)
        np.testing.assert_array_equal(out, x)


def test_open_group_count_follows_every_thread():
    assert len(_group.open_groups) == 0
    with accl.group():
        with accl.group():
            assert len(_group.open_groups) == 2
        assert len(_group.open_groups) == 1
    with pytest.raises(KeyError):
        with accl.group():
            raise KeyError("boom")
    assert len(_group.open_groups) == 0

    inside, release = threading.Barrier(5), threading.Event()

    def body():
        with accl.group():
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=body) for _ in range(4)]
    for t in threads:
        t.start()
    inside.wait()
    assert len(_group.open_groups) == 4
    assert _group.current() is None  # this thread has none open
    release.set()
    for t in threads:
        t.join()
    assert len(_group.open_groups) == 0
