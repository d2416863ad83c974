"""Every ACCL collective x datatype x op across the ranks of an MPI world,
checked against MPI's own result on the same data (MPI is the independent
reference), on the shared-memory and the socket transport; plus
ncclCommSplit against MPI_Comm_split.

Run: mpirun -np N python -m pytest tests/mpi   (docs/testing-mpi.md)

Inputs are deterministic functions of (test, rank) and are chosen so that
every result is exact whatever the reduction order: integers use wide random
values where wrapping is well defined (unsigned) or cannot happen (signed),
floats small integers / multiples of 1/2 that every datatype holds with every
partial result, max/min any representable value. Only float avg is compared
with a tolerance. For the types MPI lacks (float16, bfloat16, fp8) MPI
allgathers the inputs and the reference is computed from them with NumPy.
"""
from __future__ import annotations

import ctypes
import os
import zlib

import ml_dtypes
import numpy as np
import pytest

import mpi_helpers
from mpi_helpers import agree, attempt, compare, raw

if mpi_helpers.env_world_size() < 2:
    pytest.skip(mpi_helpers.SKIP_REASON, allow_module_level=True)

import accl  # noqa: E402
from mpi4py import MPI  # noqa: E402

pytestmark = pytest.mark.skipif(accl.query_mode()[0], reason="host arrays need host mode")

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
MPI_NATIVE = {np.dtype(t): m for t, m in [
    (np.int8, MPI.INT8_T), (np.uint8, MPI.UINT8_T), (np.int32, MPI.INT32_T), (np.uint32, MPI.UINT32_T),
    (np.int64, MPI.INT64_T), (np.uint64, MPI.UINT64_T), (np.float32, MPI.FLOAT), (np.float64, MPI.DOUBLE)]}
DTYPES = [np.dtype(t) for t in (np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64,
                                np.float16, np.float32, np.float64)] + [BF16, E4M3, E5M2]
EPS = {"float16": 2.0**-10, "float32": 2.0**-23, "float64": 2.0**-52, "bfloat16": 2.0**-7,
       "float8_e4m3fn": 2.0**-3, "float8_e5m2": 2.0**-2}
OPS = ["sum", "prod", "max", "min", "avg", "premul_sum"]
MPI_OPS = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}
PREMUL_INT, PREMUL_FLOAT = 3, 0.5  # exact: x*3 wraps like the sum; x*0.5 of a small integer is exact
COUNT = 1031  # elements per rank (per block for the blocked collectives): odd, not a power of two
DT_IDS = [d.name for d in DTYPES]


def is_float(dt: np.dtype) -> bool:
    return dt.name in EPS


def rng_for(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def make_input(dt: np.dtype, op: str, rank: int, n: int, size: int, tag: str) -> np.ndarray:
    """This rank's `size` elements for reducing with `op` over n ranks; exact in any order."""
    g = rng_for(tag, dt.name, op, rank)
    if not is_float(dt):
        info = np.iinfo(dt)
        signed = info.min < 0
        if op in ("max", "min") or (not signed and op in ("sum", "prod", "premul_sum")):
            lo, hi = int(info.min), int(info.max)  # full range; unsigned wraps the same in any order
        elif op == "prod":
            lo, hi = -3, 3  # |product| <= 81 over 4 ranks: no signed overflow
        else:  # signed sum/avg/premul_sum, unsigned avg: the sum of n (x3) cannot overflow
            lim = int(info.max) // (4 * n)
            lo, hi = (-lim if signed else 0), lim
        return g.integers(lo, hi, size=size, endpoint=True, dtype=np.int64 if signed else np.uint64).astype(dt)
    if op in ("max", "min"):  # any representable values; clipped, as float8_e4m3fn overflows to NaN
        top = float(ml_dtypes.finfo(dt).max)
        return np.clip(g.standard_normal(size) * 100, -top, top).astype(dt)
    if op == "prod":
        return g.choice(np.array([-2.0, -1.0, 1.0, 2.0]), size=size).astype(dt)  # |product| <= 16
    wide = dt in (np.dtype(np.float32), np.dtype(np.float64))
    lim = 1000 if wide else 2  # low precision: every partial |sum| <= 8 (exact in e5m2)
    return g.integers(-lim, lim, size=size, endpoint=True).astype(np.float64).astype(dt)


def accl_op(comm, op: str, dt: np.dtype):
    """(op argument, handle to destroy or None)."""
    if op != "premul_sum":
        return op, None
    h = comm.premul_sum(PREMUL_INT if not is_float(dt) else PREMUL_FLOAT, dt)
    return h, h


def premul(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    if is_float(dt):
        return (x.astype(np.float64) * PREMUL_FLOAT).astype(dt)  # exact
    return x * dt.type(PREMUL_INT)  # wraps (unsigned) like the library's product


def avg_tol(dt: np.dtype, xs_absmax: float, n: int) -> float:
    # n products x*(1/n) (1/n rounded to the type) and n-1 additions, each rounded once.
    return (n + 2) * EPS[dt.name] * max(xs_absmax, 1.0)


def int_avg(s: np.ndarray, n: int, dt: np.dtype) -> np.ndarray:
    """C division of the (non-wrapping) sum by n: truncates toward zero."""
    if np.iinfo(dt).min < 0:
        s64 = s.astype(np.int64)
        return np.where(s64 < 0, -((-s64) // n), s64 // n).astype(dt)
    return (s // dt.type(n)).astype(dt)


class Ref:
    """MPI reference reductions of x (this rank's input) over the world, for one dtype/op."""

    def __init__(self, world, dt: np.dtype, op: str):
        self.w, self.dt, self.op, self.n = world, dt, op, world.Get_size()

    def _native_input(self, x):
        return premul(x, self.dt) if self.op == "premul_sum" else x

    def _mpi_op(self):
        return MPI_OPS.get(self.op, MPI.SUM)  # avg and premul_sum: MPI sums

    def _finish(self, s: np.ndarray):
        """avg from the MPI sum; (values, atol)."""
        if self.op != "avg":
            return s, 0.0
        if not is_float(self.dt):
            return int_avg(s, self.n, self.dt), 0.0
        return s.astype(np.float64) / self.n, None  # tolerance filled in by the caller

    def _lowp(self, x, stacked: np.ndarray):
        """Reference for the types MPI lacks: reduce the gathered inputs exactly in float64."""
        f = stacked.astype(np.float64)
        if self.op == "premul_sum":
            f = f * PREMUL_FLOAT
        red = {"sum": np.sum, "avg": np.sum, "premul_sum": np.sum, "prod": np.prod,
               "max": np.max, "min": np.min}[self.op](f, axis=0)
        if self.op == "avg":
            return red / self.n
        return red.astype(self.dt)

    def _gather_all(self, x) -> np.ndarray:
        out = np.empty((self.n,) + x.shape, dtype=x.dtype)
        self.w.Allgather([raw(x), MPI.BYTE], [raw(out), MPI.BYTE])
        return out

    def allreduce(self, x):
        if self.dt in MPI_NATIVE:
            s = np.empty_like(x)
            self.w.Allreduce([self._native_input(x), MPI_NATIVE[self.dt]], [s, MPI_NATIVE[self.dt]], op=self._mpi_op())
            return self._finish(s)
        return self._lowp(x, self._gather_all(x)), self._lowp_tol()

    def _lowp_tol(self):
        return None if self.op == "avg" else 0.0  # None: the avg tolerance (finish_tol)

    def reduce(self, x, root):
        if self.dt in MPI_NATIVE:
            s = np.empty_like(x)
            self.w.Reduce([self._native_input(x), MPI_NATIVE[self.dt]], [s, MPI_NATIVE[self.dt]],
                          op=self._mpi_op(), root=root)
            return self._finish(s) if self.w.Get_rank() == root else (None, 0.0)
        full = self._lowp(x, self._gather_all(x))
        return (full, self._lowp_tol()) if self.w.Get_rank() == root else (None, 0.0)

    def reduce_scatter(self, x):
        count = x.size // self.n
        if self.dt in MPI_NATIVE:
            s = np.empty(count, dtype=self.dt)
            self.w.Reduce_scatter_block([self._native_input(x), MPI_NATIVE[self.dt]], [s, MPI_NATIVE[self.dt]],
                                        op=self._mpi_op())
            return self._finish(s)
        full = self._lowp(x, self._gather_all(x)).reshape(-1)
        r = self.w.Get_rank()
        return full[r * count:(r + 1) * count], self._lowp_tol()


def finish_tol(want, tol, dt, xs_absmax, n):
    if tol is None:  # float avg
        return want, avg_tol(dt, xs_absmax, n)
    return want, tol


def world_absmax(world, x) -> float:
    return world.allreduce(float(np.abs(x.astype(np.float64)).max()) if x.size else 0.0, op=MPI.MAX)


def check_reduced(got, want, tol, dt, what, errors):
    if want is None:
        return
    if tol:
        if got is None:
            errors.append(f"{what}: no result")
            return
        g = np.asarray(got)
        if g.dtype != dt:
            errors.append(f"{what}: dtype {g.dtype}, want {dt}")
            return
        compare(g.astype(np.float64), np.asarray(want, dtype=np.float64), what, errors, atol=tol)
    else:
        compare(got, np.asarray(want).astype(dt) if np.asarray(want).dtype != dt else want, what, errors)


# ----------------------------------------------------------------------------- reductions

@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dt", DTYPES, ids=DT_IDS)
def test_allreduce(comm, world, dt, op):
    n, r = world.Get_size(), world.Get_rank()
    x = make_input(dt, op, r, n, COUNT, "allreduce")
    errors = []
    o, h = accl_op(comm, op, dt)
    got, err = attempt(lambda: comm.allreduce(x, op=o))
    inplace = x.copy()
    got_ip, err_ip = attempt(lambda: comm.allreduce(inplace, inplace, op=o))
    if h is not None:
        h.destroy()
    ref = Ref(world, dt, op)
    want, tol = finish_tol(*ref.allreduce(x), dt, world_absmax(world, x), n)
    for e in (err, err_ip):
        if e:
            errors.append(e)
    if not err:
        check_reduced(got, want, tol, dt, f"allreduce {dt.name} {op}", errors)
    if not err_ip:
        check_reduced(got_ip, want, tol, dt, f"allreduce in place {dt.name} {op}", errors)
    agree(world, errors, f"allreduce {dt.name} {op}")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dt", DTYPES, ids=DT_IDS)
def test_reduce(comm, world, dt, op):
    n, r = world.Get_size(), world.Get_rank()
    errors = []
    results = []
    o, h = accl_op(comm, op, dt)
    for root in range(n):
        x = make_input(dt, op, r, n, COUNT, f"reduce{root}")
        results.append((x, attempt(lambda: comm.reduce(x, op=o, root=root))))
    if h is not None:
        h.destroy()
    ref = Ref(world, dt, op)
    for root, (x, (got, err)) in enumerate(results):
        want, tol = finish_tol(*ref.reduce(x, root), dt, world_absmax(world, x), n)
        what = f"reduce {dt.name} {op} root {root}"
        if err:
            errors.append(f"{what}: {err}")
        elif r == root:
            check_reduced(got, want, tol, dt, what, errors)
        elif got is not None:
            errors.append(f"{what}: returned {type(got).__name__} on a non-root rank, want None")
    agree(world, errors, f"reduce {dt.name} {op}")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dt", DTYPES, ids=DT_IDS)
def test_reduce_scatter(comm, world, dt, op):
    n, r = world.Get_size(), world.Get_rank()
    x = make_input(dt, op, r, n, n * COUNT, "reduce_scatter")
    errors = []
    o, h = accl_op(comm, op, dt)
    got, err = attempt(lambda: comm.reduce_scatter(x, op=o))
    if h is not None:
        h.destroy()
    want, tol = finish_tol(*Ref(world, dt, op).reduce_scatter(x), dt, world_absmax(world, x), n)
    if err:
        errors.append(err)
    else:
        check_reduced(got, want, tol, dt, f"reduce_scatter {dt.name} {op}", errors)
    agree(world, errors, f"reduce_scatter {dt.name} {op}")


# ----------------------------------------------------------------------------- data movement
# No arithmetic: MPI moves the raw bytes (MPI.BYTE), so every dtype has an MPI reference.

def any_input(dt: np.dtype, rank: int, size: int, tag: str) -> np.ndarray:
    g = rng_for(tag, dt.name, rank)
    if is_float(dt):
        return (g.standard_normal(size) * 100).astype(dt)
    info = np.iinfo(dt)
    return g.integers(int(info.min), int(info.max), size=size, endpoint=True,
                      dtype=np.int64 if info.min < 0 else np.uint64).astype(dt)


@pytest.mark.parametrize("dt", DTYPES, ids=DT_IDS)
def test_broadcast(comm, world, dt):
    n, r = world.Get_size(), world.Get_rank()
    results = []
    for root in range(n):
        x = any_input(dt, r, COUNT, f"bcast{root}")
        results.append((x, attempt(lambda: comm.broadcast(x, root=root))))
        buf = x.copy()
        results.append((x, attempt(lambda: comm.bcast(buf, root=root))))
    errors = []
    for i, (x, (got, err)) in enumerate(results):
        root = i // 2
        want = x.copy()
        world.Bcast([raw(want), MPI.BYTE], root=root)
        what = f"{'broadcast' if i % 2 == 0 else 'bcast (in place)'} {dt.name} root {root}"
        if err:
            errors.append(f"{what}: {err}")
        else:
            compare(got, want, what, errors)
    agree(world, errors, f"broadcast {dt.name}")


@pytest.mark.parametrize("dt", DTYPES, ids=DT_IDS)
def test_allgather(comm, world, dt):
    n, r = world.Get_size(), world.Get_rank()
    x = any_input(dt, r, COUNT, "allgather")
    got, err = attempt(lambda: comm.allgather(x))
    whole = np.zeros(n * COUNT, dtype=dt)
    whole[r * COUNT:(r + 1) * COUNT] = x
    got_ip, err_ip = attempt(lambda: comm.allgather(whole[r * COUNT:(r + 1) * COUNT], whole))
    want = np.empty((n, COUNT), dtype=dt)
    world.Allgather([raw(x), MPI.BYTE], [raw(want), MPI.BYTE])
    errors = []
    for what, g, e in (("allgather", got, err), ("allgather in place", got_ip, err_ip)):
        if e:
            errors.append(f"{what}: {e}")
        else:
            compare(g, want, f"{what} {dt.name}", errors)
    agree(world, errors, f"allgather {dt.name}")


@pytest.mark.parametrize("dt", DTYPES, ids=DT_IDS)
def test_alltoall(comm, world, dt):
    n, r = world.Get_size(), world.Get_rank()
    x = any_input(dt, r, n * COUNT, "alltoall")
    got, err = attempt(lambda: comm.alltoall(x))
    buf = x.copy()
    got_ip, err_ip = attempt(lambda: comm.alltoall(buf, buf))
    want = np.empty_like(x)
    world.Alltoall([raw(x), MPI.BYTE], [raw(want), MPI.BYTE])
    errors = []
    for what, g, e in (("alltoall", got, err), ("alltoall in place", got_ip, err_ip)):
        if e:
            errors.append(f"{what}: {e}")
        else:
            compare(g, want, f"{what} {dt.name}", errors)
    agree(world, errors, f"alltoall {dt.name}")


@pytest.mark.parametrize("dt", DTYPES, ids=DT_IDS)
def test_gather(comm, world, dt):
    n, r = world.Get_size(), world.Get_rank()
    results = []
    for root in range(n):
        x = any_input(dt, r, COUNT, f"gather{root}")
        results.append((x, attempt(lambda: comm.gather(x, root=root))))
    errors = []
    for root, (x, (got, err)) in enumerate(results):
        want = np.empty((n, COUNT), dtype=dt) if r == root else None
        world.Gather([raw(x), MPI.BYTE], [raw(want), MPI.BYTE] if r == root else None, root=root)
        what = f"gather {dt.name} root {root}"
        if err:
            errors.append(f"{what}: {err}")
        elif r == root:
            compare(got, want, what, errors)
        elif got is not None:
            errors.append(f"{what}: returned {type(got).__name__} on a non-root rank, want None")
    agree(world, errors, f"gather {dt.name}")


@pytest.mark.parametrize("dt", DTYPES, ids=DT_IDS)
def test_scatter(comm, world, dt):
    n, r = world.Get_size(), world.Get_rank()
    results = []
    for root in range(n):
        x = any_input(dt, r, n * COUNT, f"scatter{root}")  # read only at the root
        results.append((x, attempt(lambda: comm.scatter(x, root=root))))
    errors = []
    for root, (x, (got, err)) in enumerate(results):
        want = np.empty(COUNT, dtype=dt)
        world.Scatter([raw(x), MPI.BYTE] if r == root else None, [raw(want), MPI.BYTE], root=root)
        what = f"scatter {dt.name} root {root}"
        if err:
            errors.append(f"{what}: {err}")
        else:
            compare(got, want, what, errors)
    agree(world, errors, f"scatter {dt.name}")


@pytest.mark.parametrize("shift", [1, -1, 0], ids=["right", "left", "self"])
@pytest.mark.parametrize("dt", DTYPES, ids=DT_IDS)
def test_sendrecv(comm, world, dt, shift):
    n, r = world.Get_size(), world.Get_rank()
    dst, src = (r + shift) % n, (r - shift) % n
    x = any_input(dt, r, COUNT, f"sendrecv{shift}")

    def ring():
        y = np.empty_like(x)
        with accl.group():
            comm.send(x, dst)
            comm.recv(y, src)
        return y

    got, err = attempt(ring)
    want = np.empty_like(x)
    world.Sendrecv([raw(x), MPI.BYTE], dest=dst, recvbuf=[raw(want), MPI.BYTE], source=src)
    errors = []
    if err:
        errors.append(err)
    else:
        compare(got, want, f"send/recv {dt.name} shift {shift}", errors)
    agree(world, errors, f"sendrecv {dt.name}")


# ----------------------------------------------------------------------------- direct collectives
# The same collectives as the ranks of one host run them direct (each rank's
# part straight from every input into every output, design.md): on buffers
# inside ncclMemAlloc memory registered as NCCL_WIN_COLL_SYMMETRIC windows,
# which every rank maps, and on plain NumPy arrays, which the ranks reach
# through cross memory attach. Checked against MPI as above, out of place and
# in place. Over the shm transport only (with a "host" per rank they take the
# ring, covered above). WIN_COUNT makes a part span several of the direct
# path's chunks for the wider types.

SKEW = 64  # bytes: the buffers start inside the arenas, not at their base
WIN_COUNT = 20011


@pytest.fixture(scope="session", params=["windows", "plain"])
def windows(request, comm, world, transport, log_dir):
    """Two byte arenas the direct collectives run on: symmetric windows or plain arrays."""
    if transport != "shm":
        pytest.skip("direct collectives need every rank on one host")
    nbytes = world.Get_size() * WIN_COUNT * 8 + SKEW
    errors, regs = [], []
    if request.param == "plain":
        send, recv = np.zeros(nbytes, np.uint8), np.zeros(nbytes, np.uint8)
        # Rank 0's INIT log says whether the ranks reach each other's memory.
        text = (log_dir / "shm-rank0.log").read_text() if (log_dir / "shm-rank0.log").exists() else ""
        if "direct collectives on any buffer" not in text:
            errors.append("shm-rank0.log: the communicator runs no direct collectives on plain buffers")
    else:
        send, recv = accl.mem_alloc(nbytes), accl.mem_alloc(nbytes)
        # The registration's INFO lines say whether the windows run direct.
        log = log_dir / f"windows-rank{world.Get_rank()}.log"
        saved = {k: os.environ.get(k) for k in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")}
        os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT", NCCL_DEBUG_FILE=str(log))
        ctypes.CDLL(accl.library_path()).ncclResetDebugInit()
        regs, err = attempt(lambda: [comm.register_window(send), comm.register_window(recv)])
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        errors += [err] if err else []
        direct = log.read_text().count(": direct collectives") if log.exists() else 0
        if not err and direct != 2:
            errors.append(f"{log}: {direct} window(s) run direct collectives, want 2")
    os.environ["ACCL_DIRECT_MIN_BYTES"] = "0"  # every size runs direct (by default small ones take the ring)
    ctypes.CDLL(accl.library_path()).ncclResetDebugInit()
    agree(world, errors, f"direct collectives on {request.param}")
    yield send, recv
    world.Barrier()
    for w in regs or []:
        w.deregister()


def copied(y):
    """y's values, apart from the window that the next call overwrites (None stays None)."""
    return None if y is None else y.copy()


def in_window(arena: np.ndarray, dt: np.dtype, x: np.ndarray | int, at: int = 0) -> np.ndarray:
    """A view of `arena` at SKEW (plus `at` elements) holding a copy of x (or x zeros)."""
    size = x if isinstance(x, int) else x.size
    view = arena[SKEW + at * dt.itemsize:SKEW + (at + size) * dt.itemsize].view(dt)
    view[...] = 0 if isinstance(x, int) else x
    return view


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dt", DTYPES, ids=DT_IDS)
def test_allreduce_in_windows(comm, world, windows, dt, op):
    n, r = world.Get_size(), world.Get_rank()
    x = make_input(dt, op, r, n, WIN_COUNT, "allreduce-win")
    o, h = accl_op(comm, op, dt)
    send, recv = in_window(windows[0], dt, x), in_window(windows[1], dt, WIN_COUNT)
    got, err = attempt(lambda: comm.allreduce(send, recv, op=o).copy())
    inplace = in_window(windows[1], dt, x)
    got_ip, err_ip = attempt(lambda: comm.allreduce(inplace, inplace, op=o).copy())
    if h is not None:
        h.destroy()
    want, tol = finish_tol(*Ref(world, dt, op).allreduce(x), dt, world_absmax(world, x), n)
    errors = [e for e in (err, err_ip) if e]
    if not err:
        check_reduced(got, want, tol, dt, f"allreduce in windows {dt.name} {op}", errors)
    if not err_ip:
        check_reduced(got_ip, want, tol, dt, f"allreduce in place in windows {dt.name} {op}", errors)
    agree(world, errors, f"allreduce in windows {dt.name} {op}")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dt", DTYPES, ids=DT_IDS)
def test_reduce_and_reduce_scatter_in_windows(comm, world, windows, dt, op):
    n, r = world.Get_size(), world.Get_rank()
    o, h = accl_op(comm, op, dt)
    ref = Ref(world, dt, op)
    errors = []
    for root in range(n):
        x = make_input(dt, op, r, n, WIN_COUNT, f"reduce-win{root}")
        want, tol = finish_tol(*ref.reduce(x, root), dt, world_absmax(world, x), n)
        for place in ("out of place", "in place"):
            if place == "in place":
                send = recv = in_window(windows[1], dt, x)
            else:
                send, recv = in_window(windows[0], dt, x), in_window(windows[1], dt, WIN_COUNT)
            got, err = attempt(lambda: copied(comm.reduce(send, recv, op=o, root=root)))
            what = f"reduce {place} in windows {dt.name} {op} root {root}"
            if err:
                errors.append(f"{what}: {err}")
            elif r == root:
                check_reduced(got, want, tol, dt, what, errors)
    x = make_input(dt, op, r, n, n * WIN_COUNT, "reduce_scatter-win")
    want, tol = finish_tol(*ref.reduce_scatter(x), dt, world_absmax(world, x), n)
    send, recv = in_window(windows[0], dt, x), in_window(windows[1], dt, WIN_COUNT)
    got, err = attempt(lambda: comm.reduce_scatter(send, recv, op=o).copy())
    whole = in_window(windows[1], dt, x)  # in place: rank r's block of the input is its output
    got_ip, err_ip = attempt(lambda: comm.reduce_scatter(whole, whole[r * WIN_COUNT:(r + 1) * WIN_COUNT],
                                                         op=o).copy())
    if h is not None:
        h.destroy()
    for what, g, e in (("reduce_scatter", got, err), ("reduce_scatter in place", got_ip, err_ip)):
        if e:
            errors.append(f"{what} in windows: {e}")
        else:
            check_reduced(g, want, tol, dt, f"{what} in windows {dt.name} {op}", errors)
    agree(world, errors, f"reduce and reduce_scatter in windows {dt.name} {op}")


@pytest.mark.parametrize("dt", DTYPES, ids=DT_IDS)
def test_broadcast_and_allgather_in_windows(comm, world, windows, dt):
    n, r = world.Get_size(), world.Get_rank()
    errors = []
    for root in range(n):
        x = any_input(dt, r, WIN_COUNT, f"bcast-win{root}")
        want = x.copy()
        world.Bcast([raw(want), MPI.BYTE], root=root)
        send, recv = in_window(windows[0], dt, x), in_window(windows[1], dt, WIN_COUNT)
        got, err = attempt(lambda: comm.broadcast(send, recv, root=root).copy())
        buf = in_window(windows[1], dt, x)
        got_ip, err_ip = attempt(lambda: comm.bcast(buf, root=root).copy())
        for what, g, e in (("broadcast", got, err), ("bcast (in place)", got_ip, err_ip)):
            if e:
                errors.append(f"{what} in windows root {root}: {e}")
            else:
                compare(g, want, f"{what} in windows {dt.name} root {root}", errors)
    x = any_input(dt, r, WIN_COUNT, "allgather-win")
    want = np.empty((n, WIN_COUNT), dtype=dt)
    world.Allgather([raw(x), MPI.BYTE], [raw(want), MPI.BYTE])
    send, recv = in_window(windows[0], dt, x), in_window(windows[1], dt, n * WIN_COUNT)
    got, err = attempt(lambda: comm.allgather(send, recv).copy().reshape(n, WIN_COUNT))
    whole = in_window(windows[1], dt, n * WIN_COUNT)
    whole[r * WIN_COUNT:(r + 1) * WIN_COUNT] = x
    got_ip, err_ip = attempt(lambda: comm.allgather(whole[r * WIN_COUNT:(r + 1) * WIN_COUNT], whole)
                             .copy().reshape(n, WIN_COUNT))
    for what, g, e in (("allgather", got, err), ("allgather in place", got_ip, err_ip)):
        if e:
            errors.append(f"{what} in windows: {e}")
        else:
            compare(g, want, f"{what} in windows {dt.name}", errors)
    agree(world, errors, f"broadcast and allgather in windows {dt.name}")


# ----------------------------------------------------------------------------- transport, split

def test_transport(comm, world, transport, log_dir):
    """The communicator really uses the transport it is named after (INIT log lines)."""
    world.Barrier()
    path = log_dir / f"{transport}-rank{world.Get_rank()}.log"
    errors = []
    text = path.read_text() if path.exists() else ""
    kinds = {line.split(" via ")[1].split()[0] for line in text.splitlines() if " via " in line}
    want = {"shm": "shm", "socket": "net"}[transport]
    if kinds != {want}:
        errors.append(f"{path}: connections via {sorted(kinds) or 'nothing logged'}, want only {want!r}")
    agree(world, errors, f"transport {transport}")


SPLITS = {
    # name: (color(rank, n), key(rank, n)); None = no color (MPI_UNDEFINED / NCCL_SPLIT_NOCOLOR)
    "parity": (lambda r, n: r % 2, lambda r, n: r),
    "halves-reversed": (lambda r, n: r // 2, lambda r, n: -r),
    "one-reversed": (lambda r, n: 0, lambda r, n: n - r),
    "ties-by-rank": (lambda r, n: 7, lambda r, n: r % 2),
    "rank0-out": (lambda r, n: None if r == 0 else 3, lambda r, n: 0),
    "singletons": (lambda r, n: r, lambda r, n: 0),
}


@pytest.mark.parametrize("scheme", list(SPLITS))
def test_split(comm, world, scheme):
    n, r = world.Get_size(), world.Get_rank()
    color_fn, key_fn = SPLITS[scheme]
    color, key = color_fn(r, n), key_fn(r, n)
    sub, err = attempt(lambda: comm.split(color, key))
    members = total = None
    err2 = None
    if sub is not None:
        def use():
            m = sub.allgather(np.array([r], np.int32)).reshape(-1).tolist()
            t = sub.allreduce(np.array([r + 1], np.int64))
            return m, int(t[0])
        (res, err2) = attempt(use)
        if res:
            members, total = res
        info = (sub.rank, sub.size)
        sub.destroy()
    msub = world.Split(MPI.UNDEFINED if color is None else color, key)
    errors = [e for e in (err, err2) if e]
    what = f"split {scheme} (color {color}, key {key})"
    if msub == MPI.COMM_NULL:
        if sub is not None:
            errors.append(f"{what}: got a communicator, MPI_Comm_split gave MPI_COMM_NULL")
    else:
        mmembers = msub.allgather(r)
        mtotal = msub.allreduce(r + 1)
        mrank, msize = msub.Get_rank(), msub.Get_size()
        msub.Free()
        if sub is None:
            if not err:
                errors.append(f"{what}: got None, MPI_Comm_split gave a communicator")
        else:
            if info != (mrank, msize):
                errors.append(f"{what}: (rank, size) {info}, MPI {(mrank, msize)}")
            if members != mmembers:
                errors.append(f"{what}: members in rank order {members}, MPI {mmembers}")
            if total != mtotal:
                errors.append(f"{what}: allreduce on the split {total}, MPI {mtotal}")
    agree(world, errors, what)
