"""One rank of the staged-path tests (tests/gpu/test_staged.py): device buffers
between "hosts" (each process its own NCCL_HOSTID), staged through pinned host
memory by the communicator's proxy, through the C ABI with CuPy arrays; exact
integer arithmetic is the reference. Run as
`python staged_worker.py SCENARIO RANK NRANKS UID_HEX`; prints "OK" at the end."""
import ctypes
import sys
import time

import cupy as cp
import numpy as np

from rma_device_worker import I, P, check, init, lib

INT64 = 4
SUM = 0
SIZES = [1, 1000, 65536, 1 << 20]  # elements, in turn

# Holds the stream for `ns` nanoseconds: the host runs ahead of the GPU.
sleep_kernel = cp.RawKernel(r'''
extern "C" __global__ void sleep_ns(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}''', "sleep_ns")


def allreduce(comm, send, recv, s):
    check(lib.ncclAllReduce(P(send.data.ptr), P(recv.data.ptr), send.size, INT64, SUM, comm, P(s.ptr)),
          "ncclAllReduce")


def far_ahead(rank, nranks, uid):
    """100 allreduces queued behind a 300 ms kernel: every call returns before
    the GPU reaches it (the proxy waits for each in turn, long enough to nap),
    and every result is exact. One call first: CUDA loads a kernel at its
    first launch (lazy loading), which waits for the GPU."""
    comm = init(rank, nranks, uid)
    s = cp.cuda.Stream(non_blocking=True)
    calls = 100
    with s:
        ins = [cp.full(SIZES[i % 4], (rank + 1) * (i + 1), cp.int64) for i in range(calls)]
        outs = [x if i % 2 else cp.zeros_like(x) for i, x in enumerate(ins)]  # odd calls in place
        first = cp.ones(8, cp.int64)
    allreduce(comm, first, first, s)
    s.synchronize()
    assert (first == nranks).all()
    sleep_kernel((1,), (1,), (cp.uint64(300_000_000),), stream=s)
    t0 = time.monotonic()
    for x, y in zip(ins, outs):
        allreduce(comm, x, y, s)
    queued = time.monotonic() - t0
    assert queued < 0.3, f"queueing {calls} staged calls took {queued:.3f} s: a call waited for the GPU"
    assert not s.done, "the stream finished before the calls were queued"
    s.synchronize()
    total = nranks * (nranks + 1) // 2
    for i, y in enumerate(outs):
        assert (y == total * (i + 1)).all(), f"call {i} ({y.size} elements): {cp.unique(y)[:4]}"
    check(lib.ncclCommDestroy(comm), "ncclCommDestroy")


def abort(rank, nranks, uid):
    """Rank 0's allreduce (staged, or a ring kernel) waits for rank 1, which
    never calls; rank 0 aborts: its stream finishes at once and the GPU stays
    usable."""
    comm = init(rank, nranks, uid)
    if rank == 0:
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            x = cp.ones(4096, cp.int64)
        s.synchronize()
        allreduce(comm, x, x, s)
        time.sleep(1.0)
        assert not s.done, "the allreduce finished without its peer"
        t0 = time.monotonic()
        check(lib.ncclCommAbort(comm), "ncclCommAbort")
        s.synchronize()  # the wait kernel left
        assert time.monotonic() - t0 < 10
        with s:
            assert int((x + 1).sum()) > 0  # the GPU still runs work
        s.synchronize()
    else:
        time.sleep(3.0)
        check(lib.ncclCommAbort(comm), "ncclCommAbort")


lib.ncclAllGather.argtypes = [P, P, ctypes.c_size_t, I, P, P]
lib.ncclReduceScatter.argtypes = [P, P, ctypes.c_size_t, I, I, P, P]
lib.ncclBroadcast.argtypes = [P, P, ctypes.c_size_t, I, I, P, P]
lib.ncclReduce.argtypes = [P, P, ctypes.c_size_t, I, I, I, P, P]
lib.ncclRedOpCreatePreMulSum.argtypes = [ctypes.POINTER(I), P, I, I, P]
lib.ncclRedOpDestroy.argtypes = [I, P]
SCALAR_DEVICE = 0


def chunks(rank, nranks, uid):
    """Run with ACCL_STAGE_CHUNK_BYTES=65536: calls of 800 KB go in chunks.
    Rank 0 passes device buffers (staged chunks on its proxy), the others host
    buffers (the same chunks on the calling thread): the ranks' calls pair up.
    Allreduce, allgather and reduce-scatter (also in place), broadcast and
    reduce from every root, and PreMulSum with each rank's scalar in device
    memory."""
    comm = init(rank, nranks, uid)
    s = cp.cuda.Stream(non_blocking=True)
    with s:  # CuPy's work (arrays made, filled, compared) in the calls' order
        chunks_on(rank, nranks, comm, s)
    check(lib.ncclCommDestroy(comm), "ncclCommDestroy")


def chunks_on(rank, nranks, comm, s):
    xp = cp if rank == 0 else np
    c = 100_003  # int64: 13 chunks of 8192, the last one short
    ar = np.arange(c, dtype=np.int64)

    def ptr(x):
        return P(x.data.ptr if xp is cp else x.ctypes.data)

    def done(x):
        s.synchronize()
        return cp.asnumpy(x) if xp is cp else x

    send = xp.asarray(ar * (rank + 1) + rank)
    recv = xp.zeros(c, np.int64)
    check(lib.ncclAllReduce(ptr(send), ptr(recv), c, INT64, SUM, comm, P(s.ptr)), "ncclAllReduce")
    want = sum(ar * (r + 1) + r for r in range(nranks))
    assert (done(recv) == want).all(), "allreduce in chunks"

    gathered = xp.zeros(nranks * c, np.int64)
    check(lib.ncclAllGather(ptr(send), ptr(gathered), c, INT64, comm, P(s.ptr)), "ncclAllGather")
    want = np.concatenate([ar * (r + 1) + r for r in range(nranks)])
    assert (done(gathered) == want).all(), "allgather in chunks"
    inplace = xp.zeros(nranks * c, np.int64)
    inplace[rank * c:(rank + 1) * c] = send
    mine = inplace[rank * c:]
    check(lib.ncclAllGather(ptr(mine), ptr(inplace), c, INT64, comm, P(s.ptr)), "ncclAllGather in place")
    assert (done(inplace) == want).all(), "allgather in place in chunks"

    big = xp.asarray(np.arange(nranks * c, dtype=np.int64) * (rank + 1))
    out = xp.zeros(c, np.int64)
    check(lib.ncclReduceScatter(ptr(big), ptr(out), c, INT64, SUM, comm, P(s.ptr)), "ncclReduceScatter")
    full = sum(np.arange(nranks * c, dtype=np.int64) * (r + 1) for r in range(nranks))
    assert (done(out) == full[rank * c:(rank + 1) * c]).all(), "reduce-scatter in chunks"

    inplace = xp.asarray(np.arange(nranks * c, dtype=np.int64) * (rank + 1))
    check(lib.ncclReduceScatter(ptr(inplace), ptr(inplace[rank * c:]), c, INT64, SUM, comm, P(s.ptr)),
          "ncclReduceScatter in place")
    assert (done(inplace)[rank * c:(rank + 1) * c] == full[rank * c:(rank + 1) * c]).all(), "reduce-scatter in place"

    for root in range(nranks):  # every root; a non-root's unused buffer NULL
        buf = xp.asarray(ar * 3 + root) if rank == root else xp.zeros(c, np.int64)
        check(lib.ncclBroadcast(ptr(buf), ptr(buf), c, INT64, root, comm, P(s.ptr)), "ncclBroadcast")
        assert (done(buf) == ar * 3 + root).all(), f"broadcast from {root} in chunks"
        out = xp.zeros(c, np.int64)
        check(lib.ncclReduce(ptr(send), ptr(out) if rank == root else None, c, INT64, SUM, root, comm, P(s.ptr)),
              "ncclReduce")
        if rank == root:
            assert (done(out) == sum(ar * (r + 1) + r for r in range(nranks))).all(), f"reduce to {root} in chunks"
        s.synchronize()

    scalar = cp.asarray(np.array([rank + 2], np.int64))  # device memory on every rank
    op = I()
    check(lib.ncclRedOpCreatePreMulSum(ctypes.byref(op), P(scalar.data.ptr), INT64, SCALAR_DEVICE, comm),
          "ncclRedOpCreatePreMulSum")
    check(lib.ncclAllReduce(ptr(send), ptr(recv), c, INT64, op, comm, P(s.ptr)), "ncclAllReduce PreMulSum")
    want = sum((r + 2) * (ar * (r + 1) + r) for r in range(nranks))
    assert (done(recv) == want).all(), "PreMulSum with a device scalar in chunks"
    check(lib.ncclRedOpDestroy(op, comm), "ncclRedOpDestroy")


SCENARIOS = {"far_ahead": far_ahead, "abort": abort, "chunks": chunks}

if __name__ == "__main__":
    scenario, rank, nranks, uid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), bytes.fromhex(sys.argv[4])
    SCENARIOS[scenario](rank, nranks, uid)
    print("OK", flush=True)
