"""One rank of the registered-buffer collective tests (tests/gpu/test_registered.py):
ranks in separate processes on the one GPU register plain cudaMalloc buffers
with ncclCommRegister, which shares them through CUDA IPC, and the collectives
on them run direct. Through the C ABI with CuPy arrays; NumPy computes every
expected result. Run as `python registered_worker.py SCENARIO RANK NRANKS UID_HEX`;
prints "OK" at the end."""
import ctypes
import sys

import numpy as np

import cupy as cp
from rma_device_worker import FLOAT32, P, S, check, init, lib
from symmetric_worker import N, SUM, data, replayed_graph, run_collectives
from symmetric_worker import Rank as WindowRank

lib.ncclCommRegister.argtypes = [P, P, S, ctypes.POINTER(P)]
lib.ncclCommDeregister.argtypes = [P, P]
BYTES = 8 << 20  # each allocation


class Rank:
    """This rank's communicator, stream, and allocations a, b (cudaMalloc), registered unless `plain`."""

    def __init__(self, rank, nranks, uid, plain=False):
        self.rank, self.n, self.plain = rank, nranks, plain
        self.comm = init(rank, nranks, uid)
        self.s = cp.cuda.Stream(non_blocking=True)
        self.sp = P(self.s.ptr)
        self.raw, self.handles = [cp.cuda.runtime.malloc(BYTES) for _ in range(2)], [None, None]
        for dt in (cp.float32, cp.int32):  # CuPy's kernels loaded before any rank's kernel waits on the GPU
            self.view(0, 0, 16, dt).fill(0)
        cp.cuda.Device().synchronize()
        for i in range(2):
            self.register(i)

    def register(self, i):
        if not self.plain:
            h = P()
            check(lib.ncclCommRegister(self.comm, P(self.raw[i]), BYTES, ctypes.byref(h)), "ncclCommRegister")
            self.handles[i] = h

    def deregister(self, i):
        if self.handles[i] is not None:
            check(lib.ncclCommDeregister(self.comm, self.handles[i]), "ncclCommDeregister")
            self.handles[i] = None

    def view(self, which, off, count, dtype):
        mem = cp.cuda.UnownedMemory(self.raw[which], BYTES, self)
        return cp.ndarray((count,), dtype, cp.cuda.MemoryPointer(mem, off))

    # As the window ranks do: put on the stream; get waits and checks the communicator's asynchronous error.
    put = WindowRank.put
    get = WindowRank.get

    def barrier(self):
        """A collective on an unregistered buffer (the ring), waited for: after
        it every rank registered what it registered before it, and each rank's
        next call maps the peers' registrations."""
        x = cp.zeros(1, cp.float32)
        check(lib.ncclAllReduce(P(x.data.ptr), P(x.data.ptr), 1, FLOAT32, SUM, self.comm, self.sp), "barrier")
        self.s.synchronize()

    def close(self):
        self.s.synchronize()
        for i in range(2):
            self.deregister(i)
            cp.cuda.runtime.free(self.raw[i])
        check(lib.ncclCommDestroy(self.comm), "ncclCommDestroy")


def registered(rank, nranks, uid):
    """Registered buffers run direct from the first call after every rank
    registered; a replayed graph too, until a buffer it names is
    deregistered (then the ring); an unregistered buffer takes the ring;
    a buffer deregistered, freed, and replaced by a new registered allocation
    (perhaps at the same address) runs direct again. Prints the calls it
    expects to have run direct and on the ring, which the test compares with
    the communicator's count at destroy."""
    r = Rank(rank, nranks, uid)
    ring, direct = 1, 0
    r.barrier()
    direct += run_collectives(r)

    g, src, dst = replayed_graph(r)
    direct += 3

    # b deregistered and registered again (a new id): the graph still names
    # the old one, which no longer lives, so its replay takes the ring
    r.deregister(1)
    r.register(1)
    r.barrier()
    ring += 1
    r.put(src, data(rank, N, np.float32, 20))
    with r.s:
        dst.fill(0)
    g.launch(r.s)
    np.testing.assert_array_equal(r.get(dst), sum(data(q, N, np.float32, 20) for q in range(nranks)))
    ring += 1
    del g

    a, b = cp.asarray(data(rank, N, np.float32, 7)), cp.zeros(N, cp.float32)
    check(lib.ncclAllReduce(P(a.data.ptr), P(b.data.ptr), N, FLOAT32, SUM, r.comm, r.sp), "allreduce (plain)")
    np.testing.assert_array_equal(r.get(b), sum(data(q, N, np.float32, 7) for q in range(nranks)))
    ring += 1

    # b replaced: the peers drop their mapping of the old one at their next call
    r.deregister(1)
    cp.cuda.runtime.free(r.raw[1])
    r.raw[1] = cp.cuda.runtime.malloc(BYTES)
    r.register(1)
    r.barrier()
    ring += 1
    direct += run_collectives(r)
    r.close()
    print(f"expect {direct} direct, {ring} ring", flush=True)


def one_unregistered(rank, nranks, uid):
    """Rank 0 registers nothing: every rank agrees on the ring, and every
    result is right."""
    r = Rank(rank, nranks, uid, plain=rank == 0)
    r.barrier()
    calls = run_collectives(r)
    r.close()
    print(f"expect 0 direct, {calls + 1} ring", flush=True)


SCENARIOS = {"registered": registered, "one_unregistered": one_unregistered}

if __name__ == "__main__":
    scenario, rank, nranks, uid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), bytes.fromhex(sys.argv[4])
    cp.cuda.Device(0).use()
    SCENARIOS[scenario](rank, nranks, uid)
    print("OK", flush=True)
