"""The C ABI on device buffers, driven through ctypes with CuPy arrays, with
CuPy as the independent reference: several ranks on the one GPU from one
thread (ncclCommInitAll with devlist {0,0,0,0}), abort of a collective that
waits for a rank that never comes (the GPU stays usable), ncclMemAlloc, and a
soak of a few thousand random collectives."""
import concurrent.futures
import contextlib
import ctypes
import time

import numpy as np
import pytest

import accl

cp = pytest.importorskip("cupy")

lib = ctypes.CDLL(accl.library_path())
Comm = ctypes.c_void_p
TYPES = {  # ncclDataType_t: numpy dtype
    0: np.int8, 1: np.uint8, 2: np.int32, 3: np.uint32, 4: np.int64, 5: np.uint64, 6: np.float16, 7: np.float32,
    8: np.float64}
SUM, PROD, MAX, MIN, AVG = range(5)


def check(r, what):
    if r != 0:
        raise AssertionError(f"{what}: {lib.ncclGetErrorString(r).decode()} ({lib.ncclGetLastError(None).decode()})")


lib.ncclGetErrorString.restype = ctypes.c_char_p
lib.ncclGetLastError.restype = ctypes.c_char_p
P, S, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
for name, args in {
    "ncclAllReduce": [P, P, S, I, I, Comm, P], "ncclBroadcast": [P, P, S, I, I, Comm, P],
    "ncclReduce": [P, P, S, I, I, I, Comm, P], "ncclAllGather": [P, P, S, I, Comm, P],
    "ncclReduceScatter": [P, P, S, I, I, Comm, P], "ncclAlltoAll": [P, P, S, I, Comm, P],
    "ncclGather": [P, P, S, I, I, Comm, P], "ncclScatter": [P, P, S, I, I, Comm, P],
    "ncclSend": [P, S, I, I, Comm, P], "ncclRecv": [P, S, I, I, Comm, P],
    "ncclCommAbort": [Comm], "ncclCommDestroy": [Comm], "ncclCommGetAsyncError": [Comm, ctypes.POINTER(I)],
    "ncclMemAlloc": [ctypes.POINTER(P), S], "ncclMemFree": [P],
}.items():
    getattr(lib, name).argtypes = args


def init_all(n):
    comms = (Comm * n)()
    check(lib.ncclCommInitAll(comms, n, (I * n)(*([0] * n))), "ncclCommInitAll")
    return list(comms)


class Group:
    def __enter__(self):
        check(lib.ncclGroupStart(), "ncclGroupStart")

    def __exit__(self, *exc):
        if exc[0] is None:
            check(lib.ncclGroupEnd(), "ncclGroupEnd")


def ptr(a):
    return ctypes.c_void_p(a.data.ptr)


def streams(n):
    return [cp.cuda.Stream(non_blocking=True) for _ in range(n)]


def test_abort_stops_a_waiting_kernel_and_the_gpu_stays_usable():
    comms = init_all(2)
    s = streams(2)
    x = cp.ones(1 << 20, dtype=cp.float32)
    check(lib.ncclAllReduce(ptr(x), ptr(x), x.size, 7, SUM, comms[0], ctypes.c_void_p(s[0].ptr)), "ncclAllReduce")
    time.sleep(1.0)  # rank 1 never calls: the kernel waits
    assert not s[0].done
    t0 = time.monotonic()
    check(lib.ncclCommAbort(comms[0]), "ncclCommAbort")
    check(lib.ncclCommAbort(comms[1]), "ncclCommAbort")
    s[0].synchronize()  # the kernel left
    assert time.monotonic() - t0 < 10
    # a new communicator on the same GPU works
    comms = init_all(2)
    xs = [cp.full(4099, r + 1, dtype=cp.int64) for r in range(2)]
    with Group():
        for r in range(2):
            check(lib.ncclAllReduce(ptr(xs[r]), ptr(xs[r]), 4099, 4, SUM, comms[r], ctypes.c_void_p(s[r].ptr)), "ar")
    for r in range(2):
        s[r].synchronize()
        assert (xs[r] == 3).all()
        check(lib.ncclCommDestroy(comms[r]), "ncclCommDestroy")


def test_mem_alloc_is_device_memory_and_registers():
    p = ctypes.c_void_p()
    check(lib.ncclMemAlloc(ctypes.byref(p), 1 << 20), "ncclMemAlloc")
    attrs = cp.cuda.runtime.pointerGetAttributes(p.value)
    assert attrs.type == cp.cuda.runtime.memoryTypeDevice
    comms = init_all(2)
    handles = [ctypes.c_void_p() for _ in comms]
    for c, h in zip(comms, handles):
        check(lib.ncclCommRegister(ctypes.c_void_p(c), p, ctypes.c_size_t(1 << 20), ctypes.byref(h)), "register")
    # both ranks reduce into halves of the one registered allocation
    mem = cp.cuda.UnownedMemory(p.value, 1 << 20, None)
    buf = cp.ndarray(1 << 18, dtype=cp.float32, memptr=cp.cuda.MemoryPointer(mem, 0))
    halves = [buf[: 1 << 17], buf[1 << 17:]]
    halves[0].fill(1)
    halves[1].fill(2)
    cp.cuda.Device().synchronize()
    s = streams(2)
    with Group():
        for r in range(2):
            check(lib.ncclAllReduce(ptr(halves[r]), ptr(halves[r]), 1 << 17, 7, SUM, comms[r],
                                    ctypes.c_void_p(s[r].ptr)), "ncclAllReduce")
    for r in range(2):
        s[r].synchronize()
        assert (halves[r] == 3).all()
    for c, h in zip(comms, handles):
        check(lib.ncclCommDeregister(ctypes.c_void_p(c), h), "deregister")
        check(lib.ncclCommDestroy(c), "ncclCommDestroy")
    check(lib.ncclMemFree(p), "ncclMemFree")


# Waits `ns` nanoseconds on its stream (the GPU's global timer): work queued
# behind it on that stream runs late.
SPIN = cp.RawKernel(r"""
extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}""", "spin")


def finish(streams, comms, seconds=60):
    """Waits for every stream. Ranks of one process that share a stream
    need their group's one launch: launched per rank, the first kernel waits
    for ranks queued behind it until ACCL_TIMEOUT. Past `seconds`, abort the
    communicators (the kernels leave) and fail rather than wait that out."""
    deadline = time.monotonic() + seconds
    while not all(st.done for st in streams):
        if time.monotonic() > deadline:
            for c in comms:
                lib.ncclCommAbort(c)
            pytest.fail("the streams did not finish: a kernel waits for a rank queued behind it")
        time.sleep(0.005)


@pytest.mark.parametrize("layout", ["own", "one", "shared"])
def test_group_launch_keeps_every_stream_in_order(layout):
    # A group of one all-reduce per rank runs as one launch on rank 0's
    # stream (coll/dev_coll.cc devRunTogether). It must start after what
    # each rank queued before it on its stream, and end before what each
    # queued after it: here every rank's input is written late (the last
    # rank's latest), and every rank reads its output on its stream right
    # after the call. Streams: one per rank, one for all, two ranks sharing
    # one. A second all-reduce of the outputs then goes on other streams,
    # which must first wait for the communicators' earlier work.
    nranks, n = 4, (1 << 20) + 5
    comms = init_all(nranks)
    pool = streams(3)
    s = {"own": streams(nranks), "one": [pool[0]] * nranks, "shared": [pool[0], pool[1], pool[1], pool[2]]}[layout]
    xs = [cp.zeros(n, cp.int32) for _ in range(nranks)]
    outs = [cp.zeros(n, cp.int32) for _ in range(nranks)]
    cp.cuda.Device().synchronize()
    for r in range(nranks):
        with s[r]:
            SPIN((1,), (1,), (np.uint64(20_000_000 * (r + 1)),))
            xs[r].fill(r + 1)
    with Group():
        for r in range(nranks):
            check(lib.ncclAllReduce(ptr(xs[r]), ptr(outs[r]), n, 2, SUM, comms[r], ctypes.c_void_p(s[r].ptr)), "ar")
    reads = []
    for r in range(nranks):
        with s[r]:
            reads.append(outs[r] * 2)
    later = streams(nranks)
    with Group():
        for r in range(nranks):
            check(lib.ncclAllReduce(ptr(outs[r]), ptr(xs[r]), n, 2, SUM, comms[r], ctypes.c_void_p(later[r].ptr)), "ar")
    finish(s + later, comms)
    want = sum(range(1, nranks + 1))
    for r in range(nranks):
        assert int(reads[r].min()) == int(reads[r].max()) == 2 * want, r
        assert int(xs[r].min()) == int(xs[r].max()) == nranks * want, r
    for c in comms:
        check(lib.ncclCommDestroy(c), "ncclCommDestroy")


def ring(comms, s, send, recv, n):
    """Rank r sends n bytes to r + 1 and receives from r - 1, in one group."""
    nranks = len(comms)
    with Group():
        for r in range(nranks):
            st = ctypes.c_void_p(s[r].ptr)
            check(lib.ncclSend(ptr(send[r]), n, 1, (r + 1) % nranks, comms[r], st), "ncclSend")
            check(lib.ncclRecv(ptr(recv[r]), n, 1, (r - 1) % nranks, comms[r], st), "ncclRecv")


@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "odd_address"])
@pytest.mark.parametrize("in_place", [True, False], ids=["in_place", "apart"])
def test_group_of_sends_in_a_ring_runs_as_one_launch(in_place, offset):
    # One send and one receive per rank, every rank in one group, 4 ranks on
    # their own streams: rank r sends to r + 1 (a permutation, one launch:
    # coll/dev_coll.cc devRunTogether, once a first group made the
    # connections). Inputs are written late on every rank's stream and
    # outputs read right after on each; the size leaves a tail after the
    # 16-byte packs, and an odd address takes the bytewise loop.
    nranks, n = 4, (3 << 20) + 7
    comms = init_all(nranks)
    s = streams(nranks)
    scratch = [cp.zeros(n, cp.uint8) for _ in range(nranks)]
    ring(comms, s, scratch, scratch, n)  # makes the connections the usual way
    send = [cp.zeros(n + 1, cp.uint8)[offset:offset + n] for _ in range(nranks)]
    recv = send if in_place else [cp.zeros(n + 1, cp.uint8)[offset:offset + n] for _ in range(nranks)]
    finish(s, comms)
    cp.cuda.Device().synchronize()
    for r in range(nranks):
        with s[r]:
            SPIN((1,), (1,), (np.uint64(20_000_000 * (nranks - r)),))
            send[r][:] = cp.arange(n, dtype=cp.uint32).astype(cp.uint8) + r
    ring(comms, s, send, recv, n)
    reads = []
    for r in range(nranks):
        with s[r]:
            reads.append(recv[r].copy())
    finish(s, comms)
    for r in range(nranks):
        want = (np.arange(n, dtype=np.uint32) + (r - 1) % nranks).astype(np.uint8)
        assert np.array_equal(cp.asnumpy(reads[r]), want), r
    for c in comms:
        check(lib.ncclCommDestroy(c), "ncclCommDestroy")


def test_group_launch_in_one_capture():
    # Every rank's stream in one capture (forked from rank 0's and joined
    # back): the group's one launch and its join events go into the graph,
    # and each replay computes from the inputs as they are then.
    nranks, n = 4, (1 << 20) + 3
    comms = init_all(nranks)
    s = streams(nranks)
    xs = [cp.zeros(n, cp.int32) for _ in range(nranks)]
    outs = [cp.zeros(n, cp.int32) for _ in range(nranks)]
    cp.cuda.Device().synchronize()
    fork, joins = cp.cuda.Event(), [cp.cuda.Event() for _ in range(nranks)]
    s[0].begin_capture(getattr(cp.cuda.runtime, "streamCaptureModeRelaxed", None))
    fork.record(s[0])
    for r in range(1, nranks):
        s[r].wait_event(fork)
    with Group():
        for r in range(nranks):
            check(lib.ncclAllReduce(ptr(xs[r]), ptr(outs[r]), n, 2, SUM, comms[r], ctypes.c_void_p(s[r].ptr)), "ar")
    for r in range(1, nranks):
        joins[r].record(s[r])
        s[0].wait_event(joins[r])
    graph = s[0].end_capture()
    for scale in (1, 3):
        with s[0]:
            for r in range(nranks):
                xs[r].fill(scale * (r + 1))
                outs[r].fill(0)
        graph.launch(s[0])
        finish([s[0]], comms)
        want = scale * sum(range(1, nranks + 1))
        for r in range(nranks):
            assert int(outs[r].min()) == int(outs[r].max()) == want, (scale, r)
    for c in comms:
        check(lib.ncclCommDestroy(c), "ncclCommDestroy")


def test_group_of_unlike_calls_fails_cleanly():
    # Counts that differ keep a group's calls from one launch (coll/dev_coll.cc
    # collsTogether): each rank's own kernel then finds the other count, and the
    # call fails on every rank with ncclInvalidUsage, without a hang.
    nranks = 3
    comms = init_all(nranks)
    s = streams(nranks)
    xs = [cp.ones(2048, cp.float32) for _ in range(nranks)]
    cp.cuda.Device().synchronize()
    with Group():
        for r in range(nranks):
            check(lib.ncclAllReduce(ptr(xs[r]), ptr(xs[r]), 2048 if r == 0 else 1024, 7, SUM, comms[r],
                                    ctypes.c_void_p(s[r].ptr)), "ncclAllReduce")
    for r in range(nranks):
        s[r].synchronize()
        err = I()
        lib.ncclCommGetAsyncError(comms[r], ctypes.byref(err))
        assert err.value == 5, (r, err.value)  # ncclInvalidUsage
    for c in comms:
        check(lib.ncclCommAbort(c), "ncclCommAbort")


@pytest.mark.parametrize("nranks", [2, 3])
def test_large_sends_copy_between_buffers(nranks):
    # Larger than their channels' slots hold (16 MiB at 2 ranks, 7 at 3, with
    # the default NCCL_BUFFSIZE on an H200's 132 multiprocessors):
    # both ends copy half, from the sender's buffer into the receiver's. A ring
    # of sends (sources at odd addresses, counts that leave tails); then an
    # alltoall whose blocks start at odd offsets (a direct collective of these
    # ranks of one process: its pairs swap blocks, 16-byte packs or bytes);
    # CuPy's slices are the reference.
    comms = init_all(nranks)
    s = streams(nranks)
    rng = np.random.default_rng(nranks)
    for count, skew in (((40 << 20) + 3, 1), (48 << 20, 0)):
        src = [cp.asarray(rng.integers(0, 256, count + skew, dtype=np.uint8)) for _ in range(nranks)]
        dst = [cp.zeros(count, cp.uint8) for _ in range(nranks)]
        cp.cuda.Device().synchronize()
        with Group():
            for r in range(nranks):
                st = ctypes.c_void_p(s[r].ptr)
                check(lib.ncclSend(ptr(src[r][skew:]), count, 1, (r + 1) % nranks, comms[r], st), "ncclSend")
                check(lib.ncclRecv(ptr(dst[r]), count, 1, (r - 1) % nranks, comms[r], st), "ncclRecv")
        for r in range(nranks):
            s[r].synchronize()
            assert bool(cp.array_equal(dst[r], src[(r - 1) % nranks][skew:])), (count, r)
    count = (20 << 20) + 1
    src = [cp.asarray(rng.integers(0, 256, count * nranks, dtype=np.uint8)) for _ in range(nranks)]
    dst = [cp.zeros(count * nranks, cp.uint8) for _ in range(nranks)]
    cp.cuda.Device().synchronize()
    with Group():
        for r in range(nranks):
            check(lib.ncclAlltoAll(ptr(src[r]), ptr(dst[r]), count, 1, comms[r], ctypes.c_void_p(s[r].ptr)), "a2a")
    for r in range(nranks):
        s[r].synchronize()
        want = cp.concatenate([src[k][r * count:(r + 1) * count] for k in range(nranks)])
        assert bool(cp.array_equal(dst[r], want)), r
    for c in comms:
        check(lib.ncclCommDestroy(c), "ncclCommDestroy")


def test_direct_and_slot_sends_to_one_peer_keep_their_order():
    # One group, two ranks: each sends its peer a large message (copied
    # directly), a small one (through the slots), another large one and
    # another small one, in that order; the receives match them by order.
    comms = init_all(2)
    s = streams(2)
    rng = np.random.default_rng(7)
    sizes = [(36 << 20) + 5, 1000, 40 << 20, 3]
    src = [[cp.asarray(rng.integers(0, 256, n, dtype=np.uint8)) for n in sizes] for _ in range(2)]
    dst = [[cp.zeros(n, cp.uint8) for n in sizes] for _ in range(2)]
    cp.cuda.Device().synchronize()
    with Group():
        for r in range(2):
            st = ctypes.c_void_p(s[r].ptr)
            for k, n in enumerate(sizes):
                check(lib.ncclSend(ptr(src[r][k]), n, 1, 1 - r, comms[r], st), "ncclSend")
                check(lib.ncclRecv(ptr(dst[r][k]), n, 1, 1 - r, comms[r], st), "ncclRecv")
    for r in range(2):
        s[r].synchronize()
        for k in range(len(sizes)):
            assert bool(cp.array_equal(dst[r][k], src[1 - r][k])), (r, k)
    for c in comms:
        check(lib.ncclCommDestroy(c), "ncclCommDestroy")


def test_sends_ahead_of_their_receiver_wait_for_free_slots():
    # Sends that fit the slots finish before their receiver runs, so a later
    # kernel's sends must not take the slots for free: nine sends to one peer
    # (the slots are eight) in one group, then nine in groups of their own,
    # while the receiver's stream is held by a host function; every receive
    # must get its own send's bytes.
    comms = init_all(2)
    s = streams(2)
    n = 64 << 10
    warm = [cp.zeros(n, cp.uint8) for _ in range(2)]
    with Group():
        check(lib.ncclSend(ptr(warm[0]), n, 1, 1, comms[0], ctypes.c_void_p(s[0].ptr)), "ncclSend")
        check(lib.ncclRecv(ptr(warm[1]), n, 1, 0, comms[1], ctypes.c_void_p(s[1].ptr)), "ncclRecv")
    for st in s:
        st.synchronize()
    for grouped in (True, False):
        src = [cp.full(n, k + 1, cp.uint8) for k in range(9)]
        dst = [cp.zeros(n, cp.uint8) for _ in range(9)]
        cp.cuda.Device().synchronize()
        s[1].launch_host_func(lambda _: time.sleep(0.5), None)
        with Group() if grouped else contextlib.nullcontext():
            for k in range(9):
                check(lib.ncclSend(ptr(src[k]), n, 1, 1, comms[0], ctypes.c_void_p(s[0].ptr)), "ncclSend")
        for k in range(9):
            check(lib.ncclRecv(ptr(dst[k]), n, 1, 0, comms[1], ctypes.c_void_p(s[1].ptr)), "ncclRecv")
        for st in s:
            st.synchronize()
        got = [int(d[0]) for d in dst]
        assert got == list(range(1, 10)), (grouped, got)
        assert all(bool((dst[k] == k + 1).all()) for k in range(9)), grouped
    for c in comms:
        check(lib.ncclCommDestroy(c), "ncclCommDestroy")


@pytest.mark.parametrize("grouped", [True, False], ids=["one_group", "thread_per_rank"])
@pytest.mark.parametrize("count", [5, 1 << 20, 40 << 20])
@pytest.mark.parametrize("nranks", [2, 3])
def test_sendrecv_in_place(nranks, count, grouped):
    # Each rank sends its buffer to the next and receives into the same
    # buffer from the previous one: it must send what the buffer held before
    # the group (docs/api-status.md). In one group of every rank, one launch
    # moves the ring (coll/dev_coll.cc devRunTogether: each thread reads
    # every rank's bytes before it writes any), once a first group made the
    # connections. With a thread and a group per
    # rank, each rank launches its own: through the slots (5 B, 1 MiB) and
    # copied directly (40 MiB, above what the slots hold), whichever end
    # copies first.
    comms = init_all(nranks)
    s = streams(nranks)
    rng = np.random.default_rng(count + nranks)
    bufs = [cp.asarray(rng.integers(0, 256, count, dtype=np.uint8)) for _ in range(nranks)]
    before = [b.copy() for b in bufs]
    if grouped:  # a first group makes the connections (the usual way); the checked one is the one launch
        scratch = [cp.zeros(count, cp.uint8) for _ in range(nranks)]
        ring(comms, s, scratch, scratch, count)
    cp.cuda.Device().synchronize()

    def rank(r):
        st = ctypes.c_void_p(s[r].ptr)
        check(lib.ncclSend(ptr(bufs[r]), count, 1, (r + 1) % nranks, comms[r], st), "ncclSend")
        check(lib.ncclRecv(ptr(bufs[r]), count, 1, (r - 1) % nranks, comms[r], st), "ncclRecv")

    if grouped:
        with Group():
            for r in range(nranks):
                rank(r)
    else:
        def alone(r):
            with Group():
                rank(r)
        with concurrent.futures.ThreadPoolExecutor(nranks) as pool:
            list(pool.map(alone, range(nranks)))
    for r in range(nranks):
        s[r].synchronize()
        assert bool(cp.array_equal(bufs[r], before[(r - 1) % nranks])), r
    for c in comms:
        check(lib.ncclCommDestroy(c), "ncclCommDestroy")


@pytest.mark.parametrize("count", [3, 1 << 10, (20 << 20) + 1])
def test_alltoall_in_place(count):
    # sendbuff == recvbuff: each rank's own block stays, the others are
    # exchanged; CuPy's slices of copies taken before the call are the reference.
    nranks = 3
    comms = init_all(nranks)
    s = streams(nranks)
    rng = np.random.default_rng(count)
    bufs = [cp.asarray(rng.integers(0, 256, count * nranks, dtype=np.uint8)) for _ in range(nranks)]
    before = [b.copy() for b in bufs]
    cp.cuda.Device().synchronize()
    with Group():
        for r in range(nranks):
            check(lib.ncclAlltoAll(ptr(bufs[r]), ptr(bufs[r]), count, 1, comms[r], ctypes.c_void_p(s[r].ptr)), "a2a")
    for r in range(nranks):
        s[r].synchronize()
        want = cp.concatenate([before[k][r * count:(r + 1) * count] for k in range(nranks)])
        assert bool(cp.array_equal(bufs[r], want)), r
    for c in comms:
        check(lib.ncclCommDestroy(c), "ncclCommDestroy")


@pytest.mark.parametrize("kind", ["alltoall", "gather", "scatter"])
def test_buffers_overlapping_outside_the_in_place_layout(kind):
    # Send and receive buffers of one allocation that overlap, but not as
    # NCCL's in-place layout has them (all-to-all: receive 1000 bytes past
    # the send; gather and scatter: the root's block at another place). Ranks
    # of one process run these direct: such a rank's input goes from a copy.
    # Its inputs as they were before the call are the reference.
    nranks, count, shift, root = 3, (1 << 20) + 16, 1000, 1
    comms = init_all(nranks)
    s = streams(nranks)
    rng = np.random.default_rng(nranks)
    bufs = [cp.asarray(rng.integers(0, 256, nranks * count + shift, dtype=np.uint8)) for _ in range(nranks)]
    if kind == "alltoall":
        send = [b[:nranks * count] for b in bufs]
        recv = [b[shift:] for b in bufs]
    elif kind == "gather":  # the root's input overlaps its output's blocks 0 and 1
        send = [b[shift:shift + count] for b in bufs]
        recv = [b[:nranks * count] for b in bufs]
    else:  # scatter: the root's output overlaps its input's block 0
        send = [b[:nranks * count] for b in bufs]
        recv = [b[shift:shift + count] for b in bufs]
    before = [x.copy() for x in send]
    cp.cuda.Device().synchronize()
    with Group():
        for r in range(nranks):
            st = ctypes.c_void_p(s[r].ptr)
            if kind == "alltoall":
                check(lib.ncclAlltoAll(ptr(send[r]), ptr(recv[r]), count, 1, comms[r], st), kind)
            elif kind == "gather":
                check(lib.ncclGather(ptr(send[r]), ptr(recv[r]), count, 1, root, comms[r], st), kind)
            else:
                check(lib.ncclScatter(ptr(send[r]), ptr(recv[r]), count, 1, root, comms[r], st), kind)
    for r in range(nranks):
        s[r].synchronize()
    if kind == "alltoall":
        for r in range(nranks):
            want = cp.concatenate([before[k][r * count:(r + 1) * count] for k in range(nranks)])
            assert bool(cp.array_equal(recv[r], want)), r
    elif kind == "gather":
        assert bool(cp.array_equal(recv[root], cp.concatenate(before))), root
    else:
        for r in range(nranks):
            assert bool(cp.array_equal(recv[r], before[root][r * count:(r + 1) * count])), r
    for c in comms:
        check(lib.ncclCommDestroy(c), "ncclCommDestroy")


@pytest.mark.parametrize("sent,expected", [(40 << 20, 36 << 20), (48 << 20, 24 << 20), (40 << 20, 1 << 20),
                                           (1 << 20, 40 << 20)],
                         ids=["both-direct", "slices-line-up", "direct-to-slots", "slots-to-direct"])
def test_large_send_with_another_size_fails_cleanly(sent, expected):
    # A send and its receive of different sizes, copied directly on either end
    # or both: the receive fails with ncclInvalidUsage naming the sender, the
    # send stops too (no hang), and the GPU stays usable. "slices-line-up":
    # 64 slices of 768 KiB against 32 of the same size, which only the
    # operation's size (posted with each slice) tells apart.
    comms = init_all(2)
    s = streams(2)
    buf = cp.ones(48 << 20, cp.uint8)
    out = cp.zeros(48 << 20, cp.uint8)
    with Group():
        check(lib.ncclSend(ptr(buf), sent, 1, 1, comms[0], ctypes.c_void_p(s[0].ptr)), "ncclSend")
        check(lib.ncclRecv(ptr(out), expected, 1, 0, comms[1], ctypes.c_void_p(s[1].ptr)), "ncclRecv")
    t0 = time.monotonic()
    for st in s:
        st.synchronize()
    assert time.monotonic() - t0 < 20
    err = ctypes.c_int()
    check(lib.ncclCommGetAsyncError(comms[1], ctypes.byref(err)), "ncclCommGetAsyncError")
    assert err.value == 5, err.value  # ncclInvalidUsage
    msg = lib.ncclGetLastError(None).decode()
    assert "rank 0 sent" in msg and "were expected" in msg, msg
    if sent > 16 << 20:  # a direct send waits for its receiver; a send that fits the slots has finished
        check(lib.ncclCommGetAsyncError(comms[0], ctypes.byref(err)), "ncclCommGetAsyncError")
        assert err.value != 0
    for c in comms:
        check(lib.ncclCommAbort(c), "ncclCommAbort")
    comms = init_all(2)
    xs = [cp.full(1 << 20, r + 1, dtype=cp.int32) for r in range(2)]
    with Group():
        for r in range(2):
            check(lib.ncclAllReduce(ptr(xs[r]), ptr(xs[r]), 1 << 20, 2, SUM, comms[r], ctypes.c_void_p(s[r].ptr)), "ar")
    for r in range(2):
        s[r].synchronize()
        assert bool((xs[r] == 3).all())
        check(lib.ncclCommDestroy(comms[r]), "ncclCommDestroy")


def _values(rng, dtype, op, n, count):
    # Small integers: sums and products of 4 of them are exact in every type.
    lo, hi = (1, 3) if op == PROD else (-4, 5)
    if np.dtype(dtype).kind == "u":
        lo = max(lo, 0)
    return [rng.integers(lo, hi, count).astype(dtype) for _ in range(n)]


def _reduce(xs, op):
    st = np.stack([x.astype(np.float64) if x.dtype.kind == "f" else x for x in xs])
    if op == SUM:
        out = st.sum(0, dtype=st.dtype)
    elif op == PROD:
        out = st.prod(0, dtype=st.dtype)
    elif op == MAX:
        out = st.max(0)
    elif op == MIN:
        out = st.min(0)
    else:
        out = st.sum(0) / len(xs)
    return out.astype(xs[0].dtype)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("nranks", [4, 8])
def test_soak_random_collectives(nranks):
    rng = np.random.default_rng(nranks)
    comms = init_all(nranks)
    s = streams(nranks)
    iters = 1500 if nranks == 4 else 500
    for it in range(iters):
        kind = rng.choice(["allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall", "ring"])
        t = int(rng.choice(list(TYPES)))
        dtype = TYPES[t]
        op = int(rng.integers(0, 5)) if kind in ("allreduce", "reduce", "reducescatter") else SUM
        if op == AVG and np.dtype(dtype).kind != "f":
            op = SUM
        count = int(np.exp(rng.uniform(0, np.log(300000))))
        root = int(rng.integers(0, nranks))
        inplace = bool(rng.integers(0, 2))
        what = f"iteration {it}: {kind} {np.dtype(dtype).name} op {op} count {count} root {root} in-place {inplace}"
        per = count * nranks if kind in ("reducescatter", "alltoall") else count
        host = _values(rng, dtype, op, nranks, per)
        send = [cp.asarray(h) for h in host]
        outn = count * nranks if kind in ("allgather", "alltoall") else count
        if inplace and kind in ("allgather",):
            recv = [cp.zeros(outn, dtype) for _ in range(nranks)]
            for r in range(nranks):
                recv[r][r * count:(r + 1) * count] = send[r]
            send = [recv[r][r * count:(r + 1) * count] for r in range(nranks)]
        elif inplace and kind == "reducescatter":
            recv = [send[r][r * count:(r + 1) * count] for r in range(nranks)]
        elif inplace and kind != "ring":
            recv = send
        else:
            recv = [cp.zeros(outn, dtype) for _ in range(nranks)]
        cp.cuda.Device().synchronize()  # the inputs are in place before any rank's kernel reads them
        with Group():
            for r in range(nranks):
                a = (ptr(send[r]), ptr(recv[r]))
                st = ctypes.c_void_p(s[r].ptr)
                if kind == "allreduce":
                    rc = lib.ncclAllReduce(*a, count, t, op, comms[r], st)
                elif kind == "broadcast":
                    rc = lib.ncclBroadcast(*a, count, t, root, comms[r], st)
                elif kind == "reduce":
                    rc = lib.ncclReduce(*a, count, t, op, root, comms[r], st)
                elif kind == "allgather":
                    rc = lib.ncclAllGather(*a, count, t, comms[r], st)
                elif kind == "reducescatter":
                    rc = lib.ncclReduceScatter(*a, count, t, op, comms[r], st)
                elif kind == "alltoall":
                    rc = lib.ncclAlltoAll(*a, count, t, comms[r], st)
                else:  # each rank sends to the next, receives from the previous
                    check(lib.ncclSend(a[0], count, t, (r + 1) % nranks, comms[r], st), what)
                    rc = lib.ncclRecv(a[1], count, t, (r - 1) % nranks, comms[r], st)
                check(rc, what)
        for r in range(nranks):
            s[r].synchronize()
        got = [cp.asnumpy(x) for x in recv]
        for r in range(nranks):
            if kind == "allreduce":
                want = _reduce(host, op)
            elif kind == "broadcast":
                want = host[root]
            elif kind == "reduce":
                if r != root:
                    continue
                want = _reduce(host, op)
            elif kind == "allgather":
                want = np.concatenate(host)
            elif kind == "reducescatter":
                want = _reduce(host, op)[r * count:(r + 1) * count]
            elif kind == "alltoall":
                want = np.concatenate([h[r * count:(r + 1) * count] for h in host])
            else:
                want = host[(r - 1) % nranks]
            np.testing.assert_array_equal(got[r], want, err_msg=f"{what}, rank {r}")
    for c in comms:
        check(lib.ncclCommDestroy(c), "ncclCommDestroy")
