"""Measures the CPU an idle process spends (tests/python/test_idle_cpu.py):
`python idle_worker.py windows NRANKS` registers a host window on NRANKS
thread ranks of this process; `python idle_worker.py hosts RANK UID_FILE`
is one of two processes, each its own "host" (NCCL_HOSTID, set by the
caller), that run one allreduce over sockets. Then both sleep and print the
CPU this process used while idle, in percent of a core."""
import ctypes
import os
import sys
import threading
import time

import accl

lib = ctypes.CDLL(accl.library_path())
P, S = ctypes.c_void_p, ctypes.c_size_t
FLOAT32, SUM, MB = 7, 0, 1 << 20


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def check(r, what):
    assert r == 0, f"{what} returned {r}"


def windows(nranks):
    uid = UniqueId()
    check(lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
    comms, wins = [P() for _ in range(nranks)], [P() for _ in range(nranks)]
    bufs = [ctypes.create_string_buffer(MB) for _ in range(nranks)]

    def rank(r):
        check(lib.ncclCommInitRank(ctypes.byref(comms[r]), nranks, uid, r), "ncclCommInitRank")
        check(lib.ncclCommWindowRegister(comms[r], bufs[r], S(MB), ctypes.byref(wins[r]), 0), "register")

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(nranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def hosts(rank, uid_file):
    uid = UniqueId()
    if rank == 0:
        check(lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        with open(uid_file + ".tmp", "wb") as f:
            f.write(ctypes.string_at(ctypes.addressof(uid), 128))
        os.rename(uid_file + ".tmp", uid_file)
    else:
        while not os.path.exists(uid_file):
            time.sleep(0.01)
        with open(uid_file, "rb") as f:
            ctypes.memmove(ctypes.byref(uid), f.read(), 128)
    comm = P()
    check(lib.ncclCommInitRank(ctypes.byref(comm), 2, uid, rank), "ncclCommInitRank")
    buf = ctypes.create_string_buffer(MB)
    check(lib.ncclAllReduce(buf, buf, S(MB // 4), FLOAT32, SUM, comm, None), "ncclAllReduce")


if __name__ == "__main__":
    if sys.argv[1] == "windows":
        windows(int(sys.argv[2]))
    else:
        hosts(int(sys.argv[2]), sys.argv[3])
    time.sleep(0.5)  # past the spinning that follows the last message
    t0, w0 = os.times(), time.monotonic()
    time.sleep(2)
    t1, w1 = os.times(), time.monotonic()
    print(f"idle {100 * (t1.user - t0.user + t1.system - t0.system) / (w1 - w0):.1f}", flush=True)
    os._exit(0)  # the communicators stay: only the idle time was the question
