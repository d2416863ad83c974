"""One rank of the symmetric-window collective tests (tests/gpu/test_symmetric.py):
ranks in separate processes on the one GPU run the direct collectives on
buffers in windows registered with NCCL_WIN_COLL_SYMMETRIC. Through the C ABI
with CuPy arrays; NumPy computes every expected result. Run as
`python symmetric_worker.py SCENARIO RANK NRANKS UID_HEX`; prints "OK" at the end."""
import ctypes
import sys

import numpy as np

import cupy as cp
from rma_device_worker import FLOAT32, INT32, INVALID_USAGE, P, I, S, check, init, lib, register

for name, args in {
    "ncclAllGather": [P, P, S, I, P, P], "ncclReduceScatter": [P, P, S, I, I, P, P],
    "ncclBroadcast": [P, P, S, I, I, P, P], "ncclReduce": [P, P, S, I, I, I, P, P],
}.items():
    getattr(lib, name).argtypes = args

SUM, MAX = 0, 2
WIN = 8 << 20  # bytes in each window
OFF = 4096     # most buffers start this far into their window
N = (1 << 20) + 3  # elements of the allreduces: an odd count
C = 65536 + 5      # elements per rank of the allgathers and reducescatters


class Rank:
    """This rank's communicator, stream and two symmetric windows (a, b)."""

    def __init__(self, rank, nranks, uid):
        self.rank, self.n = rank, nranks
        self.comm = init(rank, nranks, uid)
        self.s = cp.cuda.Stream(non_blocking=True)
        self.sp = P(self.s.ptr)
        self.raw, self.wins = [], []
        for _ in range(2):
            p = P()
            check(lib.ncclMemAlloc(ctypes.byref(p), WIN), "ncclMemAlloc")
            self.raw.append(p)
        # Every CuPy kernel this rank uses, loaded before any rank's kernel
        # waits on the GPU (loading a module may wait for running kernels).
        for dt in (cp.float32, cp.int32):
            self.view(0, 0, 16, dt).fill(0)
        cp.cuda.Device().synchronize()
        for p in self.raw:
            self.wins.append(register(self.comm, p.value, WIN))

    def view(self, which, off, count, dtype):
        mem = cp.cuda.UnownedMemory(self.raw[which].value, WIN, self)
        return cp.ndarray((count,), dtype, cp.cuda.MemoryPointer(mem, off))

    def put(self, arr, host):
        with self.s:
            arr.set(host, stream=self.s)

    def get(self, arr):
        out = cp.asnumpy(arr, stream=self.s)
        self.s.synchronize()
        err = I()
        check(lib.ncclCommGetAsyncError(self.comm, ctypes.byref(err)), "ncclCommGetAsyncError")
        assert err.value == 0, f"asynchronous error {err.value}: {lib.ncclGetLastError(self.comm).decode()}"
        return out

    def close(self):
        self.s.synchronize()
        for w in self.wins:
            check(lib.ncclCommWindowDeregister(self.comm, w), "ncclCommWindowDeregister")
        for p in self.raw:
            check(lib.ncclMemFree(p), "ncclMemFree")
        check(lib.ncclCommDestroy(self.comm), "ncclCommDestroy")


def data(rank, count, dtype, salt=0):
    """Small integers, so that float sums are exact in any order."""
    return (((np.arange(count, dtype=np.int64) * 7 + rank * 13 + salt) % 251) - 125).astype(dtype)


def run_collectives(r):
    """Every direct collective on r's buffers a and b (r.view), out of place
    and in place, at offsets; roots whose unused buffers lie elsewhere (any
    buffer will do there). Returns the number of calls."""
    n, rank, ptr = r.n, r.rank, lambda a: P(a.data.ptr)
    # allreduce, float sum, out of place from a to b
    src, dst = r.view(0, OFF, N, cp.float32), r.view(1, OFF, N, cp.float32)
    r.put(src, data(rank, N, np.float32))
    check(lib.ncclAllReduce(ptr(src), ptr(dst), N, FLOAT32, SUM, r.comm, r.sp), "allreduce")
    np.testing.assert_array_equal(r.get(dst), sum(data(q, N, np.float32) for q in range(n)))

    # allreduce, int32 max, in place at the start of b
    buf = r.view(1, 0, N, cp.int32)
    r.put(buf, data(rank, N, np.int32, 5))
    check(lib.ncclAllReduce(ptr(buf), ptr(buf), N, INT32, MAX, r.comm, r.sp), "allreduce in place")
    np.testing.assert_array_equal(r.get(buf), np.max([data(q, N, np.int32, 5) for q in range(n)], axis=0))

    # allgather, out of place, then in place (the send buffer is this rank's part of the output)
    src, out = r.view(0, OFF, C, cp.float32), r.view(1, 0, n * C, cp.float32)
    r.put(src, data(rank, C, np.float32, 1))
    check(lib.ncclAllGather(ptr(src), ptr(out), C, FLOAT32, r.comm, r.sp), "allgather")
    np.testing.assert_array_equal(r.get(out), np.concatenate([data(q, C, np.float32, 1) for q in range(n)]))
    mine = r.view(1, rank * C * 4, C, cp.float32)
    r.put(mine, data(rank, C, np.float32, 2))
    check(lib.ncclAllGather(ptr(mine), ptr(out), C, FLOAT32, r.comm, r.sp), "allgather in place")
    np.testing.assert_array_equal(r.get(out), np.concatenate([data(q, C, np.float32, 2) for q in range(n)]))

    # reducescatter, float sum
    src, dst = r.view(0, 0, n * C, cp.float32), r.view(1, OFF, C, cp.float32)
    r.put(src, data(rank, n * C, np.float32, 3))
    check(lib.ncclReduceScatter(ptr(src), ptr(dst), C, FLOAT32, SUM, r.comm, r.sp), "reducescatter")
    total = sum(data(q, n * C, np.float32, 3) for q in range(n))
    np.testing.assert_array_equal(r.get(dst), total[rank * C:(rank + 1) * C])

    # broadcast from the last rank; the others' send buffers lie elsewhere
    root, outside = n - 1, cp.zeros(N, cp.float32)
    src, dst = r.view(0, OFF, N, cp.float32), r.view(1, OFF, N, cp.float32)
    r.put(src, data(rank, N, np.float32, 4))
    check(lib.ncclBroadcast(ptr(src if rank == root else outside), ptr(dst), N, FLOAT32, root, r.comm, r.sp),
          "broadcast")
    np.testing.assert_array_equal(r.get(dst), data(root, N, np.float32, 4))

    # reduce to rank 0, int32 sum; the others' receive buffers lie elsewhere
    src = r.view(0, OFF, N, cp.int32)
    dst = r.view(1, 0, N, cp.int32) if rank == 0 else cp.zeros(N, cp.int32)
    r.put(src, data(rank, N, np.int32, 6))
    check(lib.ncclReduce(ptr(src), ptr(dst), N, INT32, SUM, 0, r.comm, r.sp), "reduce")
    got = r.get(dst)
    if rank == 0:
        np.testing.assert_array_equal(got, sum(data(q, N, np.int32, 6) for q in range(n)))
    return 7


def replayed_graph(r):
    """An allreduce from a to b captured in a CUDA graph and replayed 3 times,
    each replay checked (the output is cleared between replays). Returns the
    graph and its buffers."""
    src, dst = r.view(0, 0, N, cp.float32), r.view(1, OFF, N, cp.float32)
    r.s.begin_capture(mode=2)  # relaxed: the other ranks' processes go on meanwhile
    check(lib.ncclAllReduce(P(src.data.ptr), P(dst.data.ptr), N, FLOAT32, SUM, r.comm, r.sp), "allreduce (capture)")
    g = r.s.end_capture()
    for it in range(3):
        r.put(src, data(r.rank, N, np.float32, 10 + it))
        with r.s:
            dst.fill(0)
        g.launch(r.s)
        np.testing.assert_array_equal(r.get(dst), sum(data(q, N, np.float32, 10 + it) for q in range(r.n)))
    return g, src, dst


def collectives(rank, nranks, uid):
    """Every direct collective on window buffers, out of place and in place,
    buffers at offsets and in two windows, roots whose unused buffers lie
    outside any window, a CUDA graph replayed, and plain buffers (the ring)."""
    r = Rank(rank, nranks, uid)
    n, ptr = nranks, lambda a: P(a.data.ptr)
    run_collectives(r)
    replayed_graph(r)

    # plain CuPy buffers on every rank: the ring
    a, b = cp.asarray(data(rank, N, np.float32, 7)), cp.zeros(N, cp.float32)
    check(lib.ncclAllReduce(ptr(a), ptr(b), N, FLOAT32, SUM, r.comm, r.sp), "allreduce (plain buffers)")
    np.testing.assert_array_equal(r.get(b), sum(data(q, N, np.float32, 7) for q in range(n)))
    r.close()


def failed(r, allowed):
    """Waits for the stream and returns the communicator's asynchronous error."""
    r.s.synchronize()
    err = I()
    check(lib.ncclCommGetAsyncError(r.comm, ctypes.byref(err)), "ncclCommGetAsyncError")
    assert err.value in allowed, f"error {err.value}, expected one of {allowed}"
    print(f"rank {r.rank}: error {err.value}: {lib.ncclGetLastError(r.comm).decode()}", flush=True)
    check(lib.ncclCommAbort(r.comm), "ncclCommAbort")


def count_mismatch(rank, nranks, uid):
    """The last rank reduces 16 more elements than the others: every rank's
    kernel stops with ncclInvalidUsage instead of reading past a buffer."""
    r = Rank(rank, nranks, uid)
    count = N + (16 if rank == nranks - 1 else 0)
    buf = r.view(0, 0, count, cp.float32)
    check(lib.ncclAllReduce(P(buf.data.ptr), P(buf.data.ptr), count, FLOAT32, SUM, r.comm, r.sp), "allreduce")
    failed(r, {INVALID_USAGE, 6})  # ncclRemoteError where a peer stopped first


def one_outside(rank, nranks, uid):
    """Rank 0's buffers lie outside the windows, the others' inside (against
    NCCL_WIN_COLL_SYMMETRIC's contract): the ranks see it in each other's
    slots and all take the ring, with the right result."""
    r = Rank(rank, nranks, uid)
    buf = cp.zeros(N, cp.float32) if rank == 0 else r.view(0, 0, N, cp.float32)
    r.put(buf, data(rank, N, np.float32, 8))
    check(lib.ncclAllReduce(P(buf.data.ptr), P(buf.data.ptr), N, FLOAT32, SUM, r.comm, r.sp), "allreduce")
    np.testing.assert_array_equal(r.get(buf), sum(data(q, N, np.float32, 8) for q in range(nranks)))
    r.close()


SCENARIOS = {"collectives": collectives, "count_mismatch": count_mismatch, "one_outside": one_outside}

if __name__ == "__main__":
    scenario, rank, nranks, uid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), bytes.fromhex(sys.argv[4])
    cp.cuda.Device(0).use()
    SCENARIOS[scenario](rank, nranks, uid)
    print("OK", flush=True)
