"""The benchmarked operations, defined as nccl-tests defines them (and as
perf/colls/*.cc do for the C++ drivers): from the swept size S, count =
S / itemsize gives each rank's buffer sizes and the call's count argument;
the table's size column is max(send, recv) bytes, its count column the
count argument; algbw = count argument bytes * alg_factor(n) / time and
busbw = algbw * bus_factor(n). In place, the send and receive buffers are
views of one buffer, offset by rank * send_in_place / recv_in_place
elements (NCCL's in-place layouts). `want` is what a rank's receive buffer
must hold afterwards, from the input patterns of data.py.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from . import data


@dataclass(frozen=True)
class Counts:
    send: int  # elements of each rank's send buffer
    recv: int  # elements of each rank's receive buffer
    param: int  # the call's count argument
    send_in_place: int = 0  # in place: send = buffer[rank * send_in_place:][:send]
    recv_in_place: int = 0  # in place: recv = buffer[rank * recv_in_place:][:recv]


@dataclass(frozen=True)
class Collective:
    name: str
    has_op: bool  # takes a reduction op (else the redop column shows "none")
    rooted: bool  # takes a root (-r; else the root column shows -1)
    counts: Callable[[int, int], Counts]  # (count, nranks)
    alg_factor: Callable[[int], float]
    bus_factor: Callable[[int], float]
    # prepare(comm, send, recv, op, root) -> a no-argument callable that runs
    # the operation once. The timed loop calls it, so an iteration costs one
    # call of the API (bound with functools.partial, in C) and nothing of
    # ours; the --compare peers time their libraries the same way (peers.py).
    prepare: Callable[[Any, np.ndarray, np.ndarray, str, int], Callable[[], Any]]
    # want(rank, nranks, root, counts, dtype, op): the receive buffer's
    # expected contents, or None where the call leaves it undefined (a
    # rooted call's non-root ranks).
    want: Callable[[int, int, int, Counts, np.dtype, str], np.ndarray | None]
    check_in_place: bool = True  # False: in-place results are not checked (nccl-tests' sendrecv)

    def run(self, comm, send: np.ndarray, recv: np.ndarray, op: str, root: int) -> None:
        """The operation once (checks, probes)."""
        self.prepare(comm, send, recv, op, root)()

    def input(self, rank: int, c: Counts, dtype: np.dtype, op: str) -> np.ndarray:
        """Rank's send buffer contents."""
        return data.fill(rank, np.arange(c.send, dtype=np.int64), dtype, op)

    def algbw(self, c: Counts, itemsize: int, nranks: int, seconds: float) -> float:
        """GB/s (1e9 bytes), as nccl-tests."""
        if seconds <= 0:
            return 0.0
        return c.param * itemsize * self.alg_factor(nranks) / 1e9 / seconds


def _blocks(n_blocks: int, param: int) -> tuple[np.ndarray, np.ndarray]:
    """(block, index within block) of every element of n_blocks blocks of param."""
    i = np.arange(n_blocks * param, dtype=np.int64)
    return i // max(param, 1), i % max(param, 1)


def _same(count: int, n: int) -> Counts:
    return Counts(count, count, count)


def _gathered(count: int, n: int) -> Counts:  # allgather, gather: n blocks out
    param = count // n
    return Counts(param, param * n, param, send_in_place=param)


def _scattered(count: int, n: int) -> Counts:  # reducescatter, scatter: n blocks in
    param = count // n
    return Counts(param * n, param, param, recv_in_place=param)


def _alltoall_counts(count: int, n: int) -> Counts:
    param = count // n
    return Counts(param * n, param * n, param)


def _one(n: int) -> float:
    return 1.0


def _n(n: int) -> float:
    return float(n)


def _ring(n: int) -> float:
    return (n - 1) / n


def _want_allreduce(rank, n, root, c, dtype, op):
    return data.expected(n, np.arange(c.recv, dtype=np.int64), dtype, op)


def _want_reduce(rank, n, root, c, dtype, op):
    return _want_allreduce(rank, n, root, c, dtype, op) if rank == root else None


def _want_reducescatter(rank, n, root, c, dtype, op):
    return data.expected(n, rank * c.param + np.arange(c.param, dtype=np.int64), dtype, op)


def _want_allgather(rank, n, root, c, dtype, op):
    block, i = _blocks(n, c.param)
    return data.fill(block, i, dtype, op)


def _want_gather(rank, n, root, c, dtype, op):
    return _want_allgather(rank, n, root, c, dtype, op) if rank == root else None


def _want_broadcast(rank, n, root, c, dtype, op):
    return data.fill(root, np.arange(c.recv, dtype=np.int64), dtype, op)


def _want_scatter(rank, n, root, c, dtype, op):
    return data.fill(root, rank * c.param + np.arange(c.param, dtype=np.int64), dtype, op)


def _want_alltoall(rank, n, root, c, dtype, op):
    block, i = _blocks(n, c.param)  # block r comes from rank r, its block `rank`
    return data.fill(block, rank * c.param + i, dtype, op)


def _want_sendrecv(rank, n, root, c, dtype, op):
    return data.fill((rank - 1) % n, np.arange(c.recv, dtype=np.int64), dtype, op)


def _sendrecv(comm, send, recv, op, root):
    nxt, prev = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    return functools.partial(comm.sendrecv, send, nxt, recv, prev)


def _scatter(comm, send, recv, op, root):
    # The root's send buffer is the only one read; elsewhere it may overlap
    # recv (in place) without NCCL's layout, so it is not passed.
    return functools.partial(comm.scatter, send if comm.rank == root else None, recv, root)


COLLECTIVES: dict[str, Collective] = {c.name: c for c in [
    Collective("allreduce", True, False, _same, _one, lambda n: 2.0 * (n - 1) / n,
               lambda comm, s, r, op, root: functools.partial(comm.allreduce, s, r, op),
               _want_allreduce),
    Collective("allgather", False, False, _gathered, _n, _ring,
               lambda comm, s, r, op, root: functools.partial(comm.allgather, s, r),
               _want_allgather),
    Collective("reducescatter", True, False, _scattered, _n, _ring,
               lambda comm, s, r, op, root: functools.partial(comm.reduce_scatter, s, r, op),
               _want_reducescatter),
    Collective("broadcast", False, True, _same, _one, _one,
               lambda comm, s, r, op, root: functools.partial(comm.broadcast, s, r, root),
               _want_broadcast),
    Collective("reduce", True, True, _same, _one, _one,
               lambda comm, s, r, op, root: functools.partial(comm.reduce, s, r, op, root),
               _want_reduce),
    Collective("alltoall", False, False, _alltoall_counts, _n, _ring,
               lambda comm, s, r, op, root: functools.partial(comm.alltoall, s, r),
               _want_alltoall),
    Collective("gather", False, True, _gathered, _n, _ring,
               lambda comm, s, r, op, root: functools.partial(comm.gather, s, r, root),
               _want_gather),
    Collective("scatter", False, True, _scattered, _n, _ring, _scatter, _want_scatter),
    Collective("sendrecv", False, False, _same, _one, _one, _sendrecv, _want_sendrecv,
               check_in_place=False),
]}


def arena(nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """A sweep's send and receive buffers (uint8, its largest size), made
    once as nccl-tests makes its buffers: every size then runs on memory that
    earlier sizes touched, not on fresh arrays whose first pages cost what the
    machine charges for them (transparent huge pages, for one, which NumPy
    asks for from 4 MiB)."""
    return np.empty(nbytes, np.uint8), np.zeros(nbytes, np.uint8)


def buffers(c: Counts, rank: int, dtype: np.dtype, in_place: bool,
            arena: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(send, recv) for one call: views at the start of the arena's send and
    receive buffers (separate arrays without one), or in place views of one
    buffer in NCCL's layout (the very same array where the views coincide,
    as the Python API asks for `recv is send`)."""
    isz = dtype.itemsize

    def take(which: int, elements: int) -> np.ndarray:
        if arena is None:
            return np.zeros(elements, dtype)
        return arena[which][:elements * isz].view(dtype)

    if not in_place:
        return take(0, c.send), take(1, c.recv)
    buf = take(1, max(c.send, c.recv))
    if c.send_in_place == c.recv_in_place == 0 and c.send == c.recv:
        view = buf[:c.send]
        return view, view
    s0, r0 = rank * c.send_in_place, rank * c.recv_in_place
    return buf[s0:s0 + c.send], buf[r0:r0 + c.recv]
