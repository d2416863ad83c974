"""One rank of the device-window tests (tests/gpu/test_rma_device.py), through
the C ABI with CuPy arrays; CuPy and NumPy are the reference. Run as threads
of the test process (`rank_main`) or as a process:
`python rma_device_worker.py SCENARIO RANK NRANKS UID_HEX`; prints "OK" at the end."""
import ctypes
import os
import sys
import time

import numpy as np

import accl

import cupy as cp

lib = ctypes.CDLL(accl.library_path())
lib.ncclGetErrorString.restype = ctypes.c_char_p
lib.ncclGetLastError.restype = ctypes.c_char_p
P, S, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


class WaitDesc(ctypes.Structure):
    _fields_ = [("opCnt", I), ("peer", I), ("sigIdx", I), ("ctx", I)]


for name, args in {
    "ncclCommInitRank": [ctypes.POINTER(P), I, UniqueId, I],
    "ncclCommWindowRegister": [P, P, S, ctypes.POINTER(P), I], "ncclCommWindowDeregister": [P, P],
    "ncclWinGetUserPtr": [P, P, ctypes.POINTER(P)], "ncclGetPeerDevicePointer": [P, S, I, ctypes.POINTER(P)],
    "ncclPutSignal": [P, S, I, I, P, S, I, I, ctypes.c_uint, P, P], "ncclSignal": [I, I, I, ctypes.c_uint, P, P],
    "ncclWaitSignal": [I, ctypes.POINTER(WaitDesc), P, P], "ncclCommDestroy": [P], "ncclCommAbort": [P],
    "ncclCommGetAsyncError": [P, ctypes.POINTER(I)], "ncclMemAlloc": [ctypes.POINTER(P), S], "ncclMemFree": [P],
    "ncclAllReduce": [P, P, S, I, I, P, P],
}.items():
    getattr(lib, name).argtypes = args

UINT8, INT32, FLOAT32 = 1, 2, 7
INVALID_USAGE, TIMEOUT = 5, 8
BLOCK = 1000              # floats each rank puts into each rank's window
BIG = 3 * 1024 * 1024 + 5  # bytes to the next rank: an odd size


def check(r, what):
    if r != 0:
        raise AssertionError(f"{what}: {lib.ncclGetErrorString(r).decode()} ({lib.ncclGetLastError(None).decode()})")


def uid_new():
    u = UniqueId()
    check(lib.ncclGetUniqueId(ctypes.byref(u)), "ncclGetUniqueId")
    return ctypes.string_at(ctypes.addressof(u), 128)  # all 128 bytes (.internal stops at a NUL)


def init(rank, nranks, uid):
    u = UniqueId()
    ctypes.memmove(ctypes.byref(u), uid, 128)
    comm = P()
    check(lib.ncclCommInitRank(ctypes.byref(comm), nranks, u, rank), f"ncclCommInitRank rank {rank}")
    return comm


def register(comm, ptr, nbytes):
    win = P()
    check(lib.ncclCommWindowRegister(comm, P(ptr), nbytes, ctypes.byref(win), 1), "ncclCommWindowRegister")
    return win


def waits(pairs):
    arr = (WaitDesc * len(pairs))()
    for i, (peer, cnt) in enumerate(pairs):
        arr[i].opCnt, arr[i].peer = cnt, peer
    return arr, len(pairs)


def big_bytes(frm):
    return ((frm * 31 + np.arange(BIG, dtype=np.int64) * 7) & 0xFF).astype(np.uint8)


def exchange(rank, nranks, uid):
    """Puts into an ncclMemAlloc window and a CuPy (pool sub-allocated) one, bare
    signals, waits on a stream, ncclGetPeerDevicePointer, deregistration."""
    comm = init(rank, nranks, uid)
    nxt, prv = (rank + 1) % nranks, (rank - 1) % nranks
    s = cp.cuda.Stream(non_blocking=True)
    sp = P(s.ptr)
    wbytes = nranks * BLOCK * 4
    raw = P()
    check(lib.ncclMemAlloc(ctypes.byref(raw), wbytes), "ncclMemAlloc")
    wmem = cp.cuda.UnownedMemory(raw.value, wbytes, None)
    wbuf = cp.ndarray((nranks * BLOCK,), cp.float32, cp.cuda.MemoryPointer(wmem, 0))
    wbuf.fill(-1)
    big_alloc = cp.zeros(BIG + 4096, cp.uint8)
    big_in = big_alloc[513:513 + BIG]  # the second window starts inside an allocation, not at its base
    # Every CuPy kernel first, before any rank can wait on the GPU: loading a
    # module may wait for the kernels running in this process (other ranks').
    block = cp.arange(BLOCK, dtype=cp.float32) + rank * 1000
    big = cp.asarray(big_bytes(rank))
    cp.cuda.Device().synchronize()
    win = register(comm, raw.value, wbytes)
    win2 = register(comm, big_in.data.ptr, BIG)
    user = P()
    check(lib.ncclWinGetUserPtr(comm, win, ctypes.byref(user)), "ncclWinGetUserPtr")
    assert user.value == raw.value

    for p in range(nranks):
        to = (rank + p) % nranks
        check(lib.ncclPutSignal(P(block.data.ptr), BLOCK, FLOAT32, to, win, rank * BLOCK * 4, 0, 0, 0, comm, sp),
              f"put to {to}")
    check(lib.ncclPutSignal(P(big.data.ptr), BIG, UINT8, nxt, win2, 0, 0, 0, 0, comm, sp), "big put")
    d, n = waits([(p, 1 + (p == prv)) for p in range(nranks)])
    check(lib.ncclWaitSignal(n, d, comm, sp), "ncclWaitSignal")
    expect = np.concatenate([np.arange(BLOCK, dtype=np.float32) + q * 1000 for q in range(nranks)])
    with s:
        got, got_big = cp.asnumpy(wbuf, stream=s), cp.asnumpy(big_in, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(got, expect)
    np.testing.assert_array_equal(got_big, big_bytes(prv))

    barrier(comm, s)  # every rank checked the first round before the second overwrites it
    # A put from host memory, and a signal with no data, ordered after it.
    host = np.full(BLOCK, rank + 0.5, np.float32)
    check(lib.ncclPutSignal(P(host.ctypes.data), BLOCK, FLOAT32, nxt, win, rank * BLOCK * 4, 0, 0, 0, comm, sp),
          "put from host memory")
    check(lib.ncclSignal(nxt, 0, 0, 0, comm, sp), "ncclSignal")
    d, n = waits([(prv, 1), (prv, 1)])  # one peer named twice: two signals
    check(lib.ncclWaitSignal(n, d, comm, sp), "ncclWaitSignal (bare)")
    with s:
        got = cp.asnumpy(wbuf[prv * BLOCK:(prv + 1) * BLOCK], stream=s)
    s.synchronize()
    np.testing.assert_array_equal(got, np.full(BLOCK, prv + 0.5, np.float32))

    # Every peer's window, as this rank's kernels see it (none on other hosts).
    remote = "NCCL_HOSTID" in os.environ  # set by the caller: every rank its own host
    for q in range(nranks):
        ptr = P()
        check(lib.ncclGetPeerDevicePointer(win, q * BLOCK * 4, q, ctypes.byref(ptr)), "ncclGetPeerDevicePointer")
        if remote and q != rank:
            assert not ptr.value, f"a device pointer to rank {q} on another host"
            continue
        assert ptr.value, f"no device pointer to rank {q}'s window"
        view = cp.ndarray((BLOCK,), cp.float32, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(ptr.value, BLOCK * 4,
                                                                                               None), 0))
        # rank q's window holds at block q what rank q put there itself: q*1000 + i
        np.testing.assert_array_equal(cp.asnumpy(view), np.arange(BLOCK, dtype=np.float32) + q * 1000)
    ptr = P()
    assert lib.ncclGetPeerDevicePointer(win, wbytes + 1, 0, ctypes.byref(ptr)) == 4  # ncclInvalidArgument
    # Wrong arguments: a put that does not fit, a device buffer put count too big.
    assert lib.ncclPutSignal(P(block.data.ptr), BLOCK + 1, FLOAT32, nxt, win, (nranks - 1) * BLOCK * 4, 0, 0, 0,
                             comm, sp) == 4
    s.synchronize()
    check(lib.ncclCommWindowDeregister(comm, win2), "deregister 2")
    check(lib.ncclCommWindowDeregister(comm, win), "deregister")
    check(lib.ncclMemFree(raw), "ncclMemFree")
    err = I()
    check(lib.ncclCommGetAsyncError(comm, ctypes.byref(err)), "ncclCommGetAsyncError")
    assert err.value == 0, err.value
    check(lib.ncclCommDestroy(comm), "ncclCommDestroy")


def graph(rank, nranks, uid):
    """A put and a wait captured in a CUDA graph, replayed: each replay moves the
    data again and consumes one signal."""
    comm = init(rank, nranks, uid)
    nxt, prv = (rank + 1) % nranks, (rank - 1) % nranks
    s = cp.cuda.Stream(non_blocking=True)
    win_mem = cp.zeros(BLOCK, cp.int32)
    src = cp.zeros(BLOCK, cp.int32)
    src.fill(1)  # loads the fill kernel now, before any rank waits on the GPU
    cp.cuda.Device().synchronize()
    win = register(comm, win_mem.data.ptr, BLOCK * 4)
    d, n = waits([(prv, 1)])
    s.begin_capture(mode=2)  # cudaStreamCaptureModeRelaxed: the other rank's thread goes on meanwhile
    check(lib.ncclPutSignal(P(src.data.ptr), BLOCK, INT32, nxt, win, 0, 0, 0, 0, comm, P(s.ptr)), "put (capture)")
    check(lib.ncclWaitSignal(n, d, comm, P(s.ptr)), "wait (capture)")
    g = s.end_capture()
    for it in range(1, 4):
        with s:
            src.fill(rank * 100 + it)
        g.launch(s)
        s.synchronize()
        # every rank's replay `it` finished: its put landed here before its signal
        np.testing.assert_array_equal(cp.asnumpy(win_mem), np.full(BLOCK, prv * 100 + it, np.int32))
        barrier(comm, s)
    check(lib.ncclCommWindowDeregister(comm, win), "deregister")
    check(lib.ncclCommDestroy(comm), "ncclCommDestroy")


def barrier(comm, s):
    x = cp.zeros(1, cp.float32)
    check(lib.ncclAllReduce(P(x.data.ptr), P(x.data.ptr), 1, FLOAT32, 0, comm, P(s.ptr)), "barrier")
    s.synchronize()


def timeout(rank, nranks, uid):
    """A wait for a signal nobody sends fails at ACCL_TIMEOUT (set small by the
    caller) with ncclTimeout, naming the peer; the others only register."""
    comm = init(rank, nranks, uid)
    mem = cp.zeros(16, cp.float32)
    cp.cuda.Device().synchronize()
    register(comm, mem.data.ptr, 64)  # collective: every rank registers the window
    if rank == 0:
        s = cp.cuda.Stream(non_blocking=True)
        d, n = waits([(1, 1)])
        check(lib.ncclWaitSignal(n, d, comm, P(s.ptr)), "ncclWaitSignal")
        s.synchronize()  # the kernel leaves at the deadline
        err = I()
        check(lib.ncclCommGetAsyncError(comm, ctypes.byref(err)), "ncclCommGetAsyncError")
        assert err.value == TIMEOUT, err.value
        msg = lib.ncclGetLastError(None).decode()
        assert "ncclWaitSignal" in msg and "rank 1" in msg, msg
        check(lib.ncclCommAbort(comm), "ncclCommAbort")
    else:
        # alive until rank 0 timed out (or its wait would end at this rank's abort)
        time.sleep(15)
        check(lib.ncclCommAbort(comm), "ncclCommAbort")


def dead(rank, nranks, uid):
    """Rank 1 aborts while rank 0's wait kernel runs: the wait ends at once
    (the receiver thread watches the peers), not at ACCL_TIMEOUT."""
    comm = init(rank, nranks, uid)
    mem = cp.zeros(16, cp.float32)
    cp.cuda.Device().synchronize()
    register(comm, mem.data.ptr, 64)
    if rank == 0:
        s = cp.cuda.Stream(non_blocking=True)
        d, n = waits([(1, 1)])
        t0 = time.monotonic()
        check(lib.ncclWaitSignal(n, d, comm, P(s.ptr)), "ncclWaitSignal")
        s.synchronize()
        assert time.monotonic() - t0 < 20
        err = I()
        check(lib.ncclCommGetAsyncError(comm, ctypes.byref(err)), "ncclCommGetAsyncError")
        assert err.value != 0
        assert "rank 1" in lib.ncclGetLastError(None).decode()
        check(lib.ncclCommAbort(comm), "ncclCommAbort")
    else:
        time.sleep(1)
        check(lib.ncclCommAbort(comm), "ncclCommAbort")


def dead_in_collective(rank, nranks, uid, poll=True):
    """Rank 1 exits without destroying its communicator after an allreduce,
    while rank 0's next allreduce waits for it in a kernel (so the call
    itself, which looks at the peers too, found it alive). Polling
    ncclCommGetAsyncError, as torch's watchdog does (poll), or only waiting
    on the stream (the watch's own thread looks), finds rank 1 gone: the
    kernel stops and the error (ncclRemoteError) names rank 1 within seconds,
    not at ACCL_TIMEOUT."""
    comm = init(rank, nranks, uid)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.ones(1 << 20, cp.float32)
    s.synchronize()
    check(lib.ncclAllReduce(P(x.data.ptr), P(x.data.ptr), x.size, FLOAT32, 0, comm, P(s.ptr)), "ncclAllReduce")
    s.synchronize()
    assert float(x[0]) == nranks and float(x[-1]) == nranks
    if rank == 1:
        time.sleep(3.0)  # rank 0's kernel waits meanwhile
        print("OK", flush=True)
        os._exit(0)
    check(lib.ncclAllReduce(P(x.data.ptr), P(x.data.ptr), x.size, FLOAT32, 0, comm, P(s.ptr)), "ncclAllReduce")
    t0 = time.monotonic()
    err = I()
    if poll:
        while True:
            check(lib.ncclCommGetAsyncError(comm, ctypes.byref(err)), "ncclCommGetAsyncError")
            if err.value not in (0, 7):  # ncclSuccess, ncclInProgress
                break
            assert time.monotonic() - t0 < 30, "no error 30 s after rank 1 died"
            time.sleep(0.05)
    s.synchronize()  # the kernel left
    assert time.monotonic() - t0 < 30, "the kernel waited on the dead rank for 30 s"
    check(lib.ncclCommGetAsyncError(comm, ctypes.byref(err)), "ncclCommGetAsyncError")
    assert err.value == 6, err.value  # ncclRemoteError
    assert "rank 1" in lib.ncclGetLastError(None).decode()
    check(lib.ncclCommAbort(comm), "ncclCommAbort")
    with s:
        assert int((cp.arange(10) + 1).sum()) == 55  # the GPU still runs work
    print("OK", flush=True)


def dead_in_collective_unpolled(rank, nranks, uid):
    dead_in_collective(rank, nranks, uid, poll=False)


def mixed(rank, nranks, uid):
    """Host memory on one rank, device memory on the others: every rank refuses."""
    comm = init(rank, nranks, uid)
    dev = cp.zeros(16, cp.float32)
    host = np.zeros(16, np.float32)
    cp.cuda.Device().synchronize()
    ptr = host.ctypes.data if rank == 0 else dev.data.ptr
    win = P()
    r = lib.ncclCommWindowRegister(comm, P(ptr), 64, ctypes.byref(win), 0)
    assert r == INVALID_USAGE, r
    assert "host memory or all device memory" in lib.ncclGetLastError(None).decode()
    check(lib.ncclCommDestroy(comm), "ncclCommDestroy")


SCENARIOS = {"exchange": exchange, "graph": graph, "timeout": timeout, "dead": dead, "mixed": mixed,
             "dead_in_collective": dead_in_collective, "dead_in_collective_unpolled": dead_in_collective_unpolled}

if __name__ == "__main__":
    scenario, rank, nranks, uid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), bytes.fromhex(sys.argv[4])
    SCENARIOS[scenario](rank, nranks, uid)
    print("OK", flush=True)
