"""Every collective of the accl Python API across 1..5 ranks, each rank a
thread of this process, against NumPy / ml_dtypes references; plus groups,
point-to-point, splits, premul_sum operators, algorithms and errors.

Design: every rank runs the same deterministic sequence of calls on its own
Communicator (no barriers), checks each result against a reference computed
from every rank's input (inputs are a function of rank and index) and records
mismatches instead of raising, so that the ranks stay in step. A rank that
hits an unexpected exception aborts all communicators, so no test can hang.

Inputs are chosen like nccl-tests' so that results are exact where the
arithmetic allows: integers wrap (the reference wraps the same way), float
sums/products use small integers / powers of two that every datatype holds
exactly, max/min are exact by nature; only float avg (sum of x * (1/n) in the
datatype's arithmetic) is compared with a tolerance. A (datatype, op) pair
that the core refuses as "not supported yet" makes its test an xfail once
everything else in it has passed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import functools
import threading
import traceback

import ml_dtypes
import numpy as np
import pytest

import accl

pytestmark = pytest.mark.skipif(accl.query_mode()[0], reason="host arrays need host mode")

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
INT_DTYPES = [np.dtype(t) for t in (np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64)]
ALL_DTYPES = INT_DTYPES + [np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64),
                           BF16, E4M3, E5M2]
DTYPE_GROUPS = {
    "int": INT_DTYPES,
    "float": [np.dtype(np.float32), np.dtype(np.float64)],
    "float16": [np.dtype(np.float16)],
    "bfloat16": [BF16],
    "fp8": [E4M3, E5M2],
}
OPS = ["sum", "prod", "max", "min", "avg", "premul"]
EPS = {"float16": 2.0**-10, "float32": 2.0**-23, "float64": 2.0**-52, "bfloat16": 2.0**-7,
       "float8_e4m3fn": 2.0**-3, "float8_e5m2": 2.0**-2}
SLOT_BYTES = 1048576 // 8  # NCCL_BUFFSIZE / 8: one FIFO slot, the pipelining chunk
PREMUL_INT, PREMUL_FLOAT = 3, 2.0
MAX_REPORTED = 12


def is_float(dt: np.dtype) -> bool:
    return dt.name in EPS


# -- inputs and references ---------------------------------------------------
def family(op: str) -> str:
    return {"prod": "prod", "max": "minmax", "min": "minmax"}.get(op, "sum")


PERIOD = 251  # prime: inputs repeat with this period, so references are cheap


def _raw(a: np.ndarray) -> np.ndarray:
    """a as same-width unsigned integers (fast to copy and tile)."""
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def tile(pattern: np.ndarray, size: int) -> np.ndarray:
    """A new array of `size` elements repeating `pattern`."""
    return np.resize(_raw(pattern), size).view(pattern.dtype)


@functools.lru_cache(maxsize=None)
def pattern(dt: np.dtype, fam: str, rank: int) -> np.ndarray:
    """One period of rank's input: exact under the op family's arithmetic."""
    i = np.arange(PERIOD, dtype=np.int64)
    j = (i * 37 + rank * 101 + 11) % PERIOD  # a permutation of 0..250, different per rank
    if not is_float(dt):
        info = np.iinfo(dt)
        signed = info.min < 0
        bits = info.bits
        if fam == "prod":
            return (j % 7 + (-3 if signed else 1)).astype(dt)
        # sum/avg/premul and minmax: spread over the whole range (high bit
        # included), so sums wrap in every width
        if signed:
            return ((j - 125) * (2 ** max(bits - 9, 0))).astype(dt)
        return (j.astype(np.uint64) * np.uint64(2 ** max(bits - 8, 0))).astype(dt)
    if fam == "prod":  # powers of two: every product of <= 5 is exact
        table = np.array([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0])
        return table[j % 6].astype(dt)
    if fam == "minmax":
        return ((j - 125) / 8.0).astype(dt)
    a = {"float8_e4m3fn": 3, "float8_e5m2": 1}.get(dt.name, 8)  # partial sums stay exact
    return (j % (2 * a + 1) - a).astype(np.float64).astype(dt)


def make_input(dt: np.dtype, fam: str, rank: int, size: int) -> np.ndarray:
    return tile(pattern(dt, fam, rank), size)


def reduce_ref(dt: np.dtype, op: str, xs: list[np.ndarray], n: int) -> tuple[np.ndarray, float]:
    """(expected result, absolute tolerance) of reducing xs with op."""
    if not is_float(dt):
        stack = np.stack(xs)
        if op == "sum":
            return np.sum(stack, axis=0, dtype=dt), 0.0
        if op == "prod":
            return np.prod(stack, axis=0, dtype=dt), 0.0
        if op == "max":
            return np.max(stack, axis=0), 0.0
        if op == "min":
            return np.min(stack, axis=0), 0.0
        if op == "premul":
            return np.sum(stack * dt.type(PREMUL_INT), axis=0, dtype=dt), 0.0
        s = np.sum(stack, axis=0, dtype=dt)  # avg: the wrapped sum, divided (C truncation)
        if np.iinfo(dt).min < 0:
            s64 = s.astype(np.int64)
            return np.where(s64 < 0, -((-s64) // n), s64 // n).astype(dt), 0.0
        return (s // dt.type(n)).astype(dt), 0.0
    stack = np.stack([x.astype(np.float64) for x in xs])
    if op == "sum":
        return stack.sum(axis=0).astype(dt), 0.0
    if op == "prod":
        return stack.prod(axis=0).astype(dt), 0.0
    if op == "max":
        return stack.max(axis=0).astype(dt), 0.0
    if op == "min":
        return stack.min(axis=0).astype(dt), 0.0
    if op == "premul":
        return (stack * PREMUL_FLOAT).sum(axis=0).astype(dt), 0.0
    # avg: n products x * (1/n) and n-1 additions, each rounded in the datatype
    bound = float(np.abs(stack).max()) if stack.size else 0.0
    # (a rounding error of at most eps/2 * bound each; bound covers every partial result)
    return stack.mean(axis=0), (n + 1) * EPS[dt.name] / 2 * bound


@functools.lru_cache(maxsize=None)
def reduced_pattern(dt: np.dtype, op: str, n: int) -> tuple[np.ndarray, float]:
    return reduce_ref(dt, op, [pattern(dt, family(op), q) for q in range(n)], n)


def expected_reduction(dt: np.dtype, op: str, n: int, size: int) -> tuple[np.ndarray, float]:
    """The reduction of every rank's `size`-element input, and its tolerance."""
    p, tol = reduced_pattern(dt, op, n)
    return (np.resize(p, size) if p.dtype == np.float64 else tile(p, size)), tol


def compare(got, want, tol: float, dt: np.dtype, what: str, errors: list) -> None:
    if len(errors) >= MAX_REPORTED:
        return
    if got is None or want is None:
        if got is not want:
            errors.append(f"{what}: got {type(got).__name__}, want {type(want).__name__}")
        return
    if got.dtype != dt:
        errors.append(f"{what}: dtype {got.dtype}, want {dt}")
        return
    g = got.reshape(-1)
    w = np.asarray(want).reshape(-1)
    if g.size != w.size:
        errors.append(f"{what}: {g.size} elements, want {w.size}")
        return
    if not tol and w.dtype == dt and np.array_equal(_raw(g), _raw(w)):
        return  # bit-identical (the fast path; references hold no NaN)
    if is_float(dt):
        gf, wf = g.astype(np.float64), w.astype(np.float64)
        if np.isnan(gf).any():
            errors.append(f"{what}: NaN at {np.flatnonzero(np.isnan(gf))[:5].tolist()}")
            return
        bad = np.abs(gf - wf) > tol if tol else gf != wf
    else:
        bad = g != w
    if bad.any():
        idx = np.flatnonzero(bad)[:5]
        errors.append(f"{what}: {int(bad.sum())}/{g.size} wrong, e.g. at {idx.tolist()}: "
                      f"got {g[idx].tolist()} want {w[idx].tolist()} (tol {tol})")


# -- running ranks as threads -------------------------------------------------
def run_ranks(nranks: int, body, timeout: float = 60.0, config=None) -> list:
    """body(comm) on a Communicator per thread; returns the bodies' results.
    A rank that raises aborts every communicator, so the others cannot hang."""
    uid = accl.get_unique_id()
    comms: list = [None] * nranks
    results: list = [None] * nranks
    failures: list = []
    lock = threading.Lock()

    def abort_all():
        for c in comms:
            if c is not None:
                try:
                    c.abort()
                except Exception:
                    pass

    def main(rank: int) -> None:
        try:
            comm = accl.Communicator(nranks, uid, rank, config=config)
            comms[rank] = comm
            with comm:
                results[rank] = body(comm)
        except BaseException:
            with lock:
                failures.append(f"rank {rank}:\n{traceback.format_exc()}")
            abort_all()

    threads = [threading.Thread(target=main, args=(r,), daemon=True) for r in range(nranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    if any(t.is_alive() for t in threads):
        abort_all()
        pytest.fail(f"ranks hung after {timeout}s: {failures}")
    if failures:
        pytest.fail("\n".join(failures[:3]))
    return results


class Refused(Exception):
    pass


def call(fn, *args, **kwargs):
    """fn(...), turning the core's "not supported yet" refusal into Refused."""
    try:
        return fn(*args, **kwargs)
    except accl.InvalidUsageError as e:
        if "not supported" in e.last_warning:
            raise Refused(e.last_warning) from None
        raise


def finish(results: list) -> None:
    """Fail on any mismatch; then xfail if the core refused pairs."""
    errors = [e for r in results for e in r["errors"]]
    assert not errors, "\n".join(errors[:MAX_REPORTED])
    refused = sorted({p for r in results for p in r["refused"]})
    if refused:
        pytest.xfail("core refuses (not supported yet): " + ", ".join(refused))


# -- one case per (collective, dtype, op, size, mode, root) -------------------
SENTINEL = 0x5A


def sentinel(shape, dt: np.dtype) -> np.ndarray:
    a = np.empty(shape, dt)
    a.view(np.uint8).reshape(-1)[:] = SENTINEL
    return a


def run_case(comm, coll: str, dt: np.dtype, op: str, count: int, mode: str,
             root: int, ops: dict, errors: list) -> None:
    """One call of `coll` on this rank and its check. mode: alloc (recv=None),
    out (recv given), in (in place: recv is send), view (NCCL's in-place
    layout with a view)."""
    n, r = comm.size, comm.rank
    fam = family(op) if op else "minmax"
    opv = ops.get(op, op)
    what = f"{coll} n={n} rank={r} {dt.name} {op or ''} count={count} {mode} root={root}"

    def inp(rank, size):
        return make_input(dt, fam, rank, size)

    def red(size):
        return expected_reduction(dt, op, n, size)

    if coll == "allreduce":
        x = inp(r, count)
        keep = x.copy()
        if mode == "in":
            got = call(comm.allreduce, x, x, op=opv)
            ok_send = got is x
        elif mode == "out":
            recv = sentinel(count, dt)
            ok_send = call(comm.allreduce, x, recv, op=opv) is recv
            got = recv
        else:
            got = call(comm.allreduce, x, op=opv)
            ok_send = got.shape == x.shape
        want, tol = red(count)
        compare(got, want, tol, dt, what, errors)
        if mode != "in":
            compare(x, keep, 0, dt, what + " (send changed)", errors)
        if not ok_send:
            errors.append(what + ": wrong array returned")
    elif coll == "reduce":
        x = inp(r, count)
        keep = x.copy()
        if mode == "in":
            got = call(comm.reduce, x, x, op=opv, root=root)
            if r != root:
                compare(x, keep, 0, dt, what + " (non-root buffer changed)", errors)
        elif mode == "out":
            recv = sentinel(count, dt)
            got = call(comm.reduce, x, recv, op=opv, root=root)
            if r == root and got is not recv:
                errors.append(what + ": wrong array returned")
            if r != root:
                compare(recv, sentinel(count, dt), 0, dt, what + " (non-root recv written)", errors)
        else:
            got = call(comm.reduce, x, op=opv, root=root)
        if r == root:
            want, tol = red(count)
            compare(got, want, tol, dt, what, errors)
        elif got is not None:
            errors.append(what + ": non-root got an array")
    elif coll == "reduce_scatter":
        x = inp(r, n * count).reshape(n, count)
        keep = x.copy()
        if mode == "in":
            got = call(comm.reduce_scatter, x, x, op=opv)
            if count and got.base is None:
                errors.append(what + ": in place returned a new array")
        elif mode == "view":
            view = x.reshape(-1)[r * count:(r + 1) * count]
            got = call(comm.reduce_scatter, x, view, op=opv)
        elif mode == "out":
            got = call(comm.reduce_scatter, x, sentinel(count, dt), op=opv)
        else:
            got = call(comm.reduce_scatter, x, op=opv)
            if got.shape != (count,):
                errors.append(f"{what}: shape {got.shape}")
        want, tol = red(n * count)
        compare(got, want[r * count:(r + 1) * count], tol, dt, what, errors)
        if mode in ("out", "alloc"):
            compare(x, keep, 0, dt, what + " (send changed)", errors)
    elif coll == "broadcast":
        x = inp(r, count)
        want = inp(root, count)
        if mode == "in":
            buf = x if r == root else sentinel(count, dt)
            got = comm.broadcast(buf, buf, root=root)
        elif mode == "view":  # non-roots pass no send at all
            recv = sentinel(count, dt)
            got = comm.broadcast(x if r == root else None, recv, root=root)
        elif mode == "out":
            got = comm.broadcast(x, sentinel(count, dt), root=root)
        else:
            got = comm.broadcast(x, root=root)
        compare(got, want, 0, dt, what, errors)
    elif coll == "allgather":
        x = inp(r, count)
        want = np.concatenate([inp(q, count) for q in range(n)])
        if mode == "in":
            buf = sentinel(n * count, dt)
            buf[r * count:(r + 1) * count] = x
            got = comm.allgather(buf, buf)
        elif mode == "view":
            buf = sentinel((n, count), dt)
            buf[r] = x
            got = comm.allgather(buf[r], buf)
        elif mode == "out":
            got = comm.allgather(x, sentinel(n * count, dt))
        else:
            got = comm.allgather(x)
            if got.shape != (n, count):
                errors.append(f"{what}: shape {got.shape}")
        compare(got, want, 0, dt, what, errors)
    elif coll == "alltoall":
        x = inp(r, n * count)
        want = np.concatenate([inp(q, n * count)[r * count:(r + 1) * count] for q in range(n)])
        if mode == "in":
            got = comm.alltoall(x, x)
        elif mode == "out":
            got = comm.alltoall(x, sentinel(n * count, dt))
        else:
            got = comm.alltoall(x.reshape(n, count))
        compare(got, want, 0, dt, what, errors)
    elif coll == "gather":
        x = inp(r, count)
        want = np.concatenate([inp(q, count) for q in range(n)]) if r == root else None
        if mode == "view":
            if r == root:
                buf = sentinel((n, count), dt)
                buf[r] = x
                got = comm.gather(buf[r], buf, root=root)
            else:
                got = comm.gather(x, root=root)
        elif mode == "out":
            got = comm.gather(x, sentinel(n * count, dt) if r == root else None, root=root)
        else:
            got = comm.gather(x, root=root)
            if r == root and got.shape != (n, count):
                errors.append(f"{what}: shape {got.shape}")
        compare(got, want, 0, dt, what, errors)
    elif coll == "scatter":
        x = inp(r, n * count)
        want = inp(root, n * count)[r * count:(r + 1) * count]
        if mode == "view":
            if r == root:
                got = comm.scatter(x, x[r * count:(r + 1) * count], root=root)
            else:
                got = comm.scatter(None, sentinel(count, dt), root=root)
        elif mode == "out":
            got = comm.scatter(x, sentinel(count, dt), root=root)
        else:
            got = comm.scatter(x.reshape(n, count), root=root)
            if got.shape != (count,):
                errors.append(f"{what}: shape {got.shape}")
        compare(got, want, 0, dt, what, errors)
    else:
        raise AssertionError(coll)


REDUCING = {"allreduce", "reduce", "reduce_scatter"}
ROOTED = {"broadcast", "reduce", "gather", "scatter"}
MODES = {
    "allreduce": ["alloc", "out", "in"],
    "reduce": ["alloc", "out", "in"],
    "reduce_scatter": ["alloc", "out", "in", "view"],
    "broadcast": ["alloc", "out", "in", "view"],
    "allgather": ["alloc", "out", "in", "view"],
    "alltoall": ["alloc", "out", "in"],
    "gather": ["alloc", "out", "view"],
    "scatter": ["alloc", "out", "view"],
}


def boundary_counts(coll: str, dt: np.dtype, n: int) -> list[int]:
    """Counts around the pipelining chunk (one FIFO slot): per block for every
    collective, and per loop of n chunks for the ring allreduce."""
    s = SLOT_BYTES // dt.itemsize
    counts = [s - 1, s, s + 1]
    if coll == "allreduce" and n > 1:
        counts += [n * s - 1, n * s + 1]
    return counts


def sequence(coll: str, n: int, dtypes: list[np.dtype]):
    """The cases every rank runs, in order: (dtype, op, count, mode, root)."""
    ops = OPS if coll in REDUCING else [None]
    k = 0
    for dt in dtypes:
        for op in ops:
            for count in (0, 1, 7):  # the full matrix on small sizes
                for mode in MODES[coll]:
                    roots = range(n) if coll in ROOTED else [0]
                    for root in roots:
                        yield dt, op, count, mode, root
            for count in boundary_counts(coll, dt, n):  # chunk boundaries: rotate mode/root
                mode = MODES[coll][k % len(MODES[coll])]
                root = (k * 2 + 1) % n if coll in ROOTED else 0
                k += 1
                yield dt, op, count, mode, root


def collective_body(coll: str, dtypes: list[np.dtype]):
    def body(comm):
        errors, refused = [], set()
        ops: dict = {}
        current = None
        for dt, op, count, mode, root in sequence(coll, comm.size, dtypes):
            if dt is not current:  # premul_sum operators for this dtype
                for o in ops.values():
                    o.destroy()
                current = dt
                scalar = PREMUL_FLOAT if is_float(dt) else PREMUL_INT
                ops = {"premul": comm.premul_sum(scalar, dt)} if coll in REDUCING else {}
            if (dt.name, op) in refused:
                continue
            try:
                run_case(comm, coll, dt, op, count, mode, root, ops, errors)
            except Refused:
                refused.add((dt.name, op))
        for o in ops.values():
            o.destroy()
        return {"errors": errors, "refused": {f"{d}/{o}" for d, o in refused}}
    return body


@pytest.mark.timeout(120)
@pytest.mark.parametrize("group", list(DTYPE_GROUPS))
@pytest.mark.parametrize("nranks", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("coll", ["allreduce", "reduce", "reduce_scatter", "broadcast",
                                  "allgather", "alltoall", "gather", "scatter"])
def test_collective(coll, nranks, group):
    finish(run_ranks(nranks, collective_body(coll, DTYPE_GROUPS[group])))


# -- large buffers (a subset) ---------------------------------------------------
LARGE = 2 * 1024 * 1024


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nranks", [3, 5])
def test_large_buffers(nranks):
    """~2 Mi elements: float32 sum and uint8 max on every collective (for
    allgather/gather the output is ~2 Mi elements)."""
    cases = [(np.dtype(np.float32), "sum"), (np.dtype(np.uint8), "max")]

    def body(comm):
        errors = []
        n = comm.size
        for dt, op in cases:
            for coll in ["allreduce", "reduce", "reduce_scatter", "broadcast", "allgather",
                         "alltoall", "gather", "scatter"]:
                per_rank = coll in ("allgather", "gather", "reduce_scatter", "alltoall",
                                    "scatter")
                count = LARGE // n + 1 if per_rank else LARGE + 3
                mode = "in" if coll in ("allreduce", "allgather") else "alloc"
                run_case(comm, coll, dt, op if coll in REDUCING else None, count, mode,
                         n - 1, {}, errors)
        return {"errors": errors, "refused": set()}

    finish(run_ranks(nranks, body))


# -- premul_sum --------------------------------------------------------------
@pytest.mark.timeout(60)
@pytest.mark.parametrize("nranks", [1, 3])
def test_premul_sum_host_and_device_scalar(nranks):
    def body(comm):
        n, r = comm.size, comm.rank
        x = np.arange(10, dtype=np.float64) + r
        base = sum(np.arange(10, dtype=np.float64) + q for q in range(n))
        out = {}
        with comm.premul_sum(0.25, np.float64) as op:
            assert isinstance(op, accl.PreMulSum) and op.dtype == np.float64
            out["host"] = comm.allreduce(x, op=op)
            out["rs"] = comm.reduce_scatter(np.tile(x, n), op=op)
            out["reduce"] = comm.reduce(x, op=op, root=n - 1)
        assert op.destroyed
        scalar = np.array([3.0], np.float64)
        op = comm.premul_sum(device_scalar=scalar)
        out["dev3"] = comm.allreduce(x, op=op)
        scalar[0] = -0.5  # read at every use
        out["dev-half"] = comm.allreduce(x, op=op)
        op.destroy()
        op.destroy()  # idempotent
        iop = comm.premul_sum(7, "int32")
        out["int"] = comm.allreduce(np.arange(5, dtype=np.int32) * (r + 1), op=iop)
        iop.destroy()
        return out, base

    for r, (out, base) in enumerate(run_ranks(nranks, body)):
        n = nranks
        np.testing.assert_array_equal(out["host"], 0.25 * base)
        np.testing.assert_array_equal(out["rs"], 0.25 * base)
        np.testing.assert_array_equal(out["dev3"], 3.0 * base)
        np.testing.assert_array_equal(out["dev-half"], -0.5 * base)
        np.testing.assert_array_equal(out["int"], 7 * np.arange(5) * (n * (n + 1) // 2))
        if r == nranks - 1:
            np.testing.assert_array_equal(out["reduce"], 0.25 * base)
        else:
            assert out["reduce"] is None


# -- groups and point to point -------------------------------------------------
@pytest.mark.timeout(60)
@pytest.mark.parametrize("nranks", [1, 2, 3, 5])
def test_ring_shift_and_self_send_in_a_group(nranks):
    def body(comm):
        n, r = comm.size, comm.rank
        x = np.arange(1000, dtype=np.int32) + 1000 * r
        big = np.full(200003, r, dtype=np.float64)  # several slots
        with accl.group() as g:
            assert accl._group.current() is g and g.depth == 1
            # receive first, then send: order inside a group does not matter
            got = comm.recv(np.empty_like(x), (r - 1) % n)
            comm.send(x, (r + 1) % n)
            got_big = comm.recv((big.shape, big.dtype), (r + 1) % n)
            comm.send(big, (r - 1) % n)
            me = comm.recv(np.empty(3, ml_dtypes.bfloat16), r)  # to self
            comm.send(np.array([1.5, -2, 3], ml_dtypes.bfloat16), r)
            # two messages to one peer match in order
            first = comm.recv(((4,), np.uint8), r)
            second = comm.recv(((4,), np.uint8), r)
            comm.send(np.full(4, 1, np.uint8), r)
            comm.send(np.full(4, 2, np.uint8), r)
        assert accl._group.current() is None
        return got, got_big, me, first, second

    for r, (got, got_big, me, first, second) in enumerate(run_ranks(nranks, body)):
        np.testing.assert_array_equal(got, np.arange(1000) + 1000 * ((r - 1) % nranks))
        np.testing.assert_array_equal(got_big, np.full(200003, (r + 1) % nranks, np.float64))
        np.testing.assert_array_equal(me.astype(np.float64), [1.5, -2, 3])
        np.testing.assert_array_equal(first, [1] * 4)
        np.testing.assert_array_equal(second, [2] * 4)


@pytest.mark.timeout(60)
def test_send_recv_outside_a_group():
    def body(comm):
        if comm.rank == 0:
            comm.send(np.arange(300000, dtype=np.float32), 1)
            return comm.recv(((5,), "int64"), 1)
        got = comm.recv(np.empty(300000, np.float32), 0)
        comm.send(np.arange(5), 0)
        return got

    a, b = run_ranks(2, body)
    np.testing.assert_array_equal(a, np.arange(5))
    np.testing.assert_array_equal(b, np.arange(300000, dtype=np.float32))


@pytest.mark.timeout(60)
def test_group_nesting_and_collectives_in_a_group():
    def body(comm):
        n, r = comm.size, comm.rank
        x = np.full(7, r + 1, np.int64)
        with accl.group() as outer:
            a = comm.allreduce(x)
            with comm.group() as inner:
                assert inner.depth == 2
                b = comm.allgather(np.array([r], np.int32))
                with accl.group():
                    c = comm.broadcast(np.full(3, r, np.float32), root=n - 1)
                d = comm.reduce_scatter(np.arange(2 * n, dtype=np.float64))
            assert outer.depth == 1
            comm.send(np.array([r], np.int64), (r + 1) % n)
            f = comm.recv(((1,), np.int64), (r - 1) % n)
        return a, b, c, d, f

    n = 3
    for r, (a, b, c, d, f) in enumerate(run_ranks(n, body)):
        np.testing.assert_array_equal(a, np.full(7, n * (n + 1) // 2))
        np.testing.assert_array_equal(b.reshape(-1), np.arange(n))
        np.testing.assert_array_equal(c, np.full(3, n - 1))
        np.testing.assert_array_equal(d, n * np.arange(2 * n, dtype=np.float64)[2 * r:2 * r + 2])
        np.testing.assert_array_equal(f, [(r - 1) % n])


@pytest.mark.timeout(60)
def test_one_thread_drives_all_ranks_with_groups():
    """NCCL's single-thread pattern: init every rank inside a group, then run
    each collective for all ranks inside a group."""
    n = 4
    uid = accl.get_unique_id()
    with accl.group() as g:
        comms = [accl.Communicator(n, uid, r) for r in range(n)]
        with pytest.raises(accl.InvalidUsageError, match="group"):
            comms[0].rank
    assert [c.rank for c in comms] == list(range(n)) and {c.size for c in comms} == {n}
    try:
        xs = [np.arange(1000, dtype=np.float32) * (r + 1) for r in range(n)]
        with accl.group():
            outs = [c.allreduce(x) for c, x in zip(comms, xs)]
            gathered = [c.allgather(np.array([r], np.uint8)) for r, c in enumerate(comms)]
            for r, c in enumerate(comms):
                c.send(xs[r], (r + 1) % n)
            ring = [c.recv(np.empty(1000, np.float32), (r - 1) % n) for r, c in enumerate(comms)]
        assert len(g._keep) == 0  # references are dropped once a group has ended
        for r in range(n):
            np.testing.assert_array_equal(outs[r], np.arange(1000, dtype=np.float32) * 10)
            np.testing.assert_array_equal(gathered[r].reshape(-1), np.arange(n))
            np.testing.assert_array_equal(ring[r], xs[(r - 1) % n])
        # splits inside a group are ready after it
        with accl.group():
            subs = [c.split(r % 2, key=r) for r, c in enumerate(comms)]
        assert [(s.rank, s.size) for s in subs] == [(0, 2), (0, 2), (1, 2), (1, 2)]
        with accl.group():
            sums = [s.allreduce(np.array([r], np.int32)) for r, s in enumerate(subs)]
        assert [int(s[0]) for s in sums] == [2, 4, 2, 4]
        for s in subs:
            s.destroy()
    finally:
        for c in comms:
            c.destroy()


@pytest.mark.timeout(60)
def test_group_keeps_arrays_alive_until_it_ends():
    import gc
    import weakref

    def body(comm):
        with accl.group() as g:
            x = np.full(100000, comm.rank + 1.0)
            ref = weakref.ref(x)
            out = comm.allreduce(x)
            del x
            gc.collect()
            assert ref() is not None, "the group must hold the send array"
            assert any(o is out for o in g._keep)
        gc.collect()
        assert ref() is None, "the group must let go of the arrays once it ended"
        return out

    for out in run_ranks(2, body):
        np.testing.assert_array_equal(out, np.full(100000, 3.0))


@pytest.mark.timeout(60)
def test_group_that_raises_runs_nothing():
    def body(comm):
        x = np.ones(10, np.float32)
        recv = np.zeros(10, np.float32)
        with pytest.raises(KeyError):
            with accl.group():
                comm.allreduce(x, recv)
                raise KeyError("boom")
        assert accl._group.current() is None
        after = comm.allreduce(x)  # the communicator is still usable
        return recv, after

    for recv, after in run_ranks(2, body):
        np.testing.assert_array_equal(recv, np.zeros(10))
        np.testing.assert_array_equal(after, np.full(10, 2.0))


@pytest.mark.timeout(60)
def test_nested_group_that_raises_fails_the_outer_group():
    # The library holds one list of queued calls for every level: an inner
    # block that raised (its exception caught inside the outer one) fails the
    # outermost group, which runs nothing and says why.
    def body(comm):
        x = np.ones(10, np.float32)
        first, second = np.zeros(10, np.float32), np.zeros(10, np.float32)
        with pytest.raises(accl.InvalidUsageError, match="nested group's block raised"):
            with accl.group():
                comm.allreduce(x, first)
                try:
                    with accl.group():
                        comm.allreduce(x, second)
                        raise KeyError("boom")
                except KeyError:
                    pass
        assert accl._group.current() is None
        return first, second, comm.allreduce(x)

    for first, second, after in run_ranks(2, body):
        np.testing.assert_array_equal(first, np.zeros(10))
        np.testing.assert_array_equal(second, np.zeros(10))
        np.testing.assert_array_equal(after, np.full(10, 2.0))


@pytest.mark.timeout(60)
def test_simulate_estimates_and_runs_nothing():
    def body(comm):
        x = np.ones(1 << 20, np.float32)
        recv = np.zeros(1 << 20, np.float32)
        with accl.group(simulate=True) as small:
            comm.allreduce(x[:1024], recv[:1024])
        with accl.simulate() as large:
            comm.allreduce(x, recv)
            comm.allgather(x[:1000])
        assert not recv.any(), "a simulated group ran"
        return small.estimated_time, large.estimated_time

    for small, large in run_ranks(3, body):
        assert 0 < small < large < 1e7


@pytest.mark.timeout(60)
def test_non_blocking_communicators():
    def body(comm):
        r = comm.rank
        a = comm.allreduce(np.full(300000, r + 1, np.int32))
        b = comm.allgather(np.array([r], np.int64))
        with accl.group():
            c = comm.reduce_scatter(np.ones(6, np.float32))
        return a, b, c

    for a, b, c in run_ranks(3, body, config={"blocking": 0}):
        np.testing.assert_array_equal(a, np.full(300000, 6))
        np.testing.assert_array_equal(b.reshape(-1), [0, 1, 2])
        np.testing.assert_array_equal(c, [3.0, 3.0])


# -- splits --------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_splits_of_splits_membership():
    """6 ranks split by parity (key reverses the order), then each half split
    again (the lowest child rank joins no communicator)."""
    n = 6

    def body(comm):
        r = comm.rank
        half = comm.split(r % 2, key=-r)
        members = half.allgather(np.array([r], np.int32)).reshape(-1).tolist()
        total = int(half.allreduce(np.array([r], np.int64))[0])
        info = {"half": (half.rank, half.size, members, total)}
        quarter = half.split(None if half.rank == 0 else 7, key=half.rank)
        if quarter is None:
            info["quarter"] = None
        else:
            qm = quarter.allgather(np.array([r], np.int32)).reshape(-1).tolist()
            info["quarter"] = (quarter.rank, quarter.size, qm)
            quarter.destroy()
        nocolor = comm.split(accl.SPLIT_NOCOLOR if r != 2 else 0)
        info["solo"] = None if nocolor is None else (nocolor.rank, nocolor.size)
        if nocolor is not None:
            np.testing.assert_array_equal(nocolor.allreduce(np.array([5.0])), [5.0])
            nocolor.destroy()
        half.destroy()
        return info

    results = run_ranks(n, body)
    for r, info in enumerate(results):
        same = sorted((q for q in range(n) if q % 2 == r % 2), reverse=True)
        assert info["half"] == (same.index(r), 3, same, sum(same)), (r, info)
        if same.index(r) == 0:
            assert info["quarter"] is None
        else:
            assert info["quarter"] == (same.index(r) - 1, 2, same[1:]), (r, info)
        assert info["solo"] == ((0, 1) if r == 2 else None)


# -- algorithms, many ranks (subprocesses: parameters are read at init) ------
ALGO_SCRIPT = textwrap.dedent("""
    import sys, threading
    import numpy as np
    import accl
    out, n = sys.argv[1], int(sys.argv[2])
    uid = accl.get_unique_id()
    res, errs = [{} for _ in range(n)], []
    S = 131072 // 4  # float32/int32 elements in a FIFO slot
    SIZES = [1, 7, 2 * S - 1, 2 * S + 1, n * S + 1]
    def main(r):
        try:
            with accl.Communicator(n, uid, r) as comm:
                for size in SIZES:
                    for dt in ["int32", "float32"]:
                        for op in ["sum", "prod", "max", "min", "avg"]:
                            x = ((np.arange(size) * (r + 3) + r) % 5 + 1).astype(dt)
                            res[r][f"{size}-{dt}-{op}"] = comm.allreduce(x, op=op)
        except BaseException as e:
            errs.append(repr(e))
    ts = [threading.Thread(target=main, args=(r,)) for r in range(n)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not errs, errs
    for r in range(1, n):  # every rank holds the same result
        for k, v in res[r].items():
            assert np.array_equal(v, res[0][k]), (r, k)
    np.savez(out, **res[0])
""")


def _run_script(script: str, args: list[str], env_extra: dict, timeout: float = 90):
    env = dict(os.environ, **env_extra)
    env.setdefault("NCCL_SOCKET_IFNAME", "lo")
    proc = subprocess.run([sys.executable, "-c", script] + args, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nranks,chunk", [(2, "0"), (2, "4096"), (3, "0"), (4, "0")])
def test_ring_and_tree_allreduce_agree(nranks, chunk, tmp_path):
    """NCCL_ALGO=ring and =tree (read at init: one process each) give the
    reference result; exactly the same one where the arithmetic is exact.
    With 2 ranks the tree is one exchange (both ranks reduce everything);
    4 KiB slots make its FIFOs wrap many times (64 chunks at 2S+1)."""
    files = {}
    for algo in ("ring", "tree"):
        files[algo] = tmp_path / f"{algo}.npz"
        log = tmp_path / f"{algo}.log"
        _run_script(ALGO_SCRIPT, [str(files[algo]), str(nranks)],
                    {"NCCL_ALGO": algo, "NCCL_DEBUG": "TRACE", "NCCL_DEBUG_SUBSYS": "COLL",
                     "NCCL_DEBUG_FILE": str(log), "ACCL_CHUNKSIZE": chunk})
        text = log.read_text() if log.exists() else ""
        other = "tree" if algo == "ring" else "ring"
        assert f"algo {algo}" in text and f"algo {other}" not in text, text[-2000:]
    ring, tree = np.load(files["ring"]), np.load(files["tree"])
    assert set(ring.files) == set(tree.files) and ring.files
    for key in ring.files:
        size, dt, op = key.split("-")
        xs = [((np.arange(int(size)) * (r + 3) + r) % 5 + 1).astype(dt) for r in range(nranks)]
        want, tol = reduce_ref(np.dtype(dt), op, xs, nranks)
        for name, got in (("ring", ring[key]), ("tree", tree[key])):
            if tol:
                np.testing.assert_allclose(got, want, atol=tol, rtol=0, err_msg=f"{name} {key}")
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{name} {key}")


EXCHANGE_BITS_SCRIPT = textwrap.dedent("""
    import sys, threading
    import numpy as np
    import accl
    uid = accl.get_unique_id()
    # NaNs with different payloads and zeros of both signs, where min and max
    # depend on the order of their operands.
    bits = [np.array([0x7fc00001, 0x80000000, 0x00000000, 0x3f800000, 0x7fc00002, 0xff800000], np.uint32),
            np.array([0x7fc00003, 0x00000000, 0x80000000, 0x7fc00004, 0x3f800000, 0x7f800000], np.uint32)]
    res, errs = [{}, {}], []
    def main(r):
        try:
            with accl.Communicator(2, uid, r) as comm:
                x = np.tile(bits[r], 1000).view(np.float32)
                for op in ["sum", "prod", "max", "min"]:
                    res[r][op] = comm.allreduce(x, op=op).tobytes()
        except BaseException as e:
            errs.append(repr(e))
    ts = [threading.Thread(target=main, args=(r,)) for r in range(2)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not errs, errs
    for op in res[0]:
        assert res[0][op] == res[1][op], op
    print("OK")
""")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("algo", ["ring", "tree"])
def test_two_ranks_get_the_same_bits(algo):
    """Both ranks of a 2-rank allreduce hold the same bits, also where the
    operands' order matters (NaN payloads, signed zeros under min and max):
    the exchange (NCCL_ALGO=tree) reduces in rank order on both."""
    proc = _run_script(EXCHANGE_BITS_SCRIPT, [], {"NCCL_ALGO": f"allreduce:{algo}"})
    assert "OK" in proc.stdout


MANY_SCRIPT = textwrap.dedent("""
    import sys, threading
    import numpy as np
    import accl
    n = int(sys.argv[1])
    uid = accl.get_unique_id()
    errs, bad = [], []
    def main(r):
        try:
            with accl.Communicator(n, uid, r) as comm:
                g = comm.allgather(np.full(100003, r, np.int32))
                if not (g == np.arange(n, dtype=np.int32)[:, None]).all():
                    bad.append(f"allgather rank {r}")
                s = comm.allreduce(np.full(300001, r, np.float32))
                if not (s == n * (n - 1) / 2).all():
                    bad.append(f"allreduce rank {r}")
                t = comm.allreduce(np.full(7, r + 1, np.int64), op="prod")
                if not (t == np.prod(np.arange(1, n + 1))).all():
                    bad.append(f"prod rank {r}")
        except BaseException as e:
            errs.append(f"rank {r}: {e!r}")
    ts = [threading.Thread(target=main, args=(r,)) for r in range(n)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not errs and not bad, (errs, bad)
    # VmHWM: this process's peak RSS (ru_maxrss would include the parent's from before exec)
    with open("/proc/self/status") as f:
        print([int(l.split()[1]) // 1024 for l in f if l.startswith("VmHWM:")][0])
""")


@pytest.mark.timeout(120)
def test_sixteen_ranks_in_threads_small_buffers():
    proc = _run_script(MANY_SCRIPT, ["16"], {"NCCL_BUFFSIZE": "262144"})
    max_rss_mib = int(proc.stdout.split()[-1])
    assert max_rss_mib < 512, f"16 ranks used {max_rss_mib} MiB"  # ~180 MiB seen


# -- errors --------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_op_from_another_communicator_or_destroyed_is_invalid_argument():
    with accl.Communicator(1, accl.get_unique_id(), 0) as a, \
            accl.Communicator(1, accl.get_unique_id(), 0) as b:
        x = np.ones(4, np.float32)
        op = a.premul_sum(2.0, np.float32)
        np.testing.assert_array_equal(a.allreduce(x, op=op), 2 * x)
        for fn in (lambda: b.allreduce(x, op=op), lambda: b.reduce(x, op=op),
                   lambda: b.reduce_scatter(x, op=op)):
            with pytest.raises(accl.InvalidArgumentError) as info:
                fn()
            assert info.value.code == accl.Result.INVALID_ARGUMENT
        with pytest.raises(accl.InvalidArgumentError, match="created for"):
            a.allreduce(np.ones(4, np.float64), op=op)  # made for float32
        op.destroy()
        assert op.destroyed
        with pytest.raises(accl.InvalidArgumentError):
            a.allreduce(x, op=op)
        with pytest.raises(accl.InvalidArgumentError):
            _ = accl._accl.redop_destroy(a._comm, op.op)  # twice in C
        with pytest.raises(accl.InvalidArgumentError):
            accl._accl.redop_destroy(a._comm, int(accl.RedOp.SUM))


@pytest.mark.timeout(60)
def test_root_or_peer_out_of_range_is_invalid_argument():
    def body(comm):
        x = np.ones(4, np.float32)
        n = comm.size
        calls = [lambda root: comm.broadcast(x, root=root),
                 lambda root: comm.reduce(x, root=root),
                 lambda root: comm.gather(x, root=root),
                 lambda root: comm.scatter(np.ones(4 * n, np.float32), root=root),
                 lambda root: comm.send(x, root),
                 lambda root: comm.recv(np.empty(4, np.float32), root)]
        for fn in calls:
            for root in (n, -1, 99):
                with pytest.raises(accl.InvalidArgumentError):
                    fn(root)
        return True

    assert run_ranks(2, body) == [True, True]


def test_python_side_argument_checks():
    with accl.Communicator(1, accl.get_unique_id(), 0) as c:
        x = np.arange(8, dtype=np.float32)
        with pytest.raises(ValueError, match="in-place layout"):
            c.allreduce(x[1:], x[:7])
        with pytest.raises(ValueError, match="elements"):
            c.allgather(x, np.zeros(7, np.float32))
        with pytest.raises(ValueError, match="dtype"):
            c.broadcast(x, np.zeros(8, np.float64))
        with pytest.raises(TypeError):
            c.broadcast(None)
        with pytest.raises(ValueError, match="None at the root"):
            c.broadcast(None, np.zeros(8, np.float32))
        with pytest.raises(TypeError, match="shape, dtype"):
            c.recv(5, 0)
        with pytest.raises(TypeError, match="NCCL datatype"):
            c.send(np.zeros(3, np.complex64), 0)
        with pytest.raises(TypeError):
            c.premul_sum(2.0)
        with pytest.raises(ValueError, match="1-element"):
            c.premul_sum(device_scalar=np.ones(2))
        with pytest.raises(ValueError, match="contiguous"):
            c.alltoall(np.zeros(16, np.float32)[::2])
        ro = np.zeros(8, np.float32)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="writeable"):
            c.reduce(x, ro)
        np.testing.assert_array_equal(c.reduce(ro), ro)  # a read-only send is fine
    with accl.Communicator(1, accl.get_unique_id(), 0) as c:
        pass
    with pytest.raises(accl.InvalidUsageError):
        c.broadcast(np.zeros(2))
    with pytest.raises(accl.InvalidUsageError):
        c.split(0)


def test_multi_rank_python_side_checks():
    def body(comm):
        n = comm.size
        with pytest.raises(ValueError, match="multiple of nranks"):
            comm.reduce_scatter(np.ones(n * 2 + 1, np.float32))
        with pytest.raises(ValueError, match="multiple of nranks"):
            comm.alltoall(np.ones(n + 1, np.float32))
        buf = np.zeros(4 * n, np.float32)
        wrong = (comm.rank + 1) % n
        with pytest.raises(ValueError, match="in-place layout"):
            comm.allgather(buf[wrong * 4:(wrong + 1) * 4], buf)
        return True

    assert run_ranks(3, body) == [True] * 3


# -- the rest of the C API -------------------------------------------------------
def test_register_mem_alloc_and_comm_unique_id():
    with accl.Communicator(1, accl.get_unique_id(), 0) as c:
        a = accl.mem_alloc((4, 5), np.float32)
        assert a.shape == (4, 5) and a.dtype == np.float32 and a.flags.writeable
        a[:] = 3
        with c.register(a) as reg:
            assert reg.registered
            np.testing.assert_array_equal(c.allreduce(a, a), np.full((4, 5), 3.0))
        assert not reg.registered
        reg.deregister()  # idempotent
        with pytest.raises(accl.InvalidArgumentError):
            accl._accl.comm_deregister(c._comm, reg.handle)
        uid = c.get_unique_id()
        assert isinstance(uid, bytes) and len(uid) == accl.UNIQUE_ID_BYTES
        with accl.Communicator(1, [uid, accl.get_unique_id()], 0) as scalable:
            assert (scalable.rank, scalable.size) == (0, 1)
            np.testing.assert_array_equal(scalable.allgather(np.arange(3)), [[0, 1, 2]])
        del a
        bf = accl.mem_alloc(6, "bfloat16")
        assert bf.dtype == BF16 and bf.shape == (6,)


def test_dtype_helpers():
    assert accl.bfloat16 == BF16 and accl.float8_e4m3fn == E4M3 and accl.float8_e5m2 == E5M2
    for dt in ALL_DTYPES:
        code = accl._dtypes.datatype_of(dt)
        assert accl.numpy_dtype(code) == dt
    assert accl.numpy_dtype(accl.DataType.HALF) == np.float16
    assert accl._dtypes.to_dtype("e5m2") == E5M2 and accl._dtypes.to_dtype("bf16") == BF16
