"""Sends and receives large enough to go straight from buffer to buffer
(coll/p2p.cc, "Pulled sends"), each with its expected result computed apart
from the library. Shared by test_p2p_direct.py's ranks as threads (one
process: buffers reached at their addresses) and as processes (cross memory
attach)."""
from __future__ import annotations

import time

import numpy as np

import accl

# 1 MiB and 12 bytes of int32: nine 128 KiB chunks, the last one short.
COUNT = (1 << 18) + 3


def data(rank: int, tag: int, count: int = COUNT) -> np.ndarray:
    """Rank `rank`'s values for pattern `tag`: differ by rank, tag and place."""
    return (np.arange(count, dtype=np.int64) * 2654435761 + rank * 7919 + tag * 104729).astype(np.int32)


def run(comm) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every pattern on `comm` (3 ranks or more): name -> (got, want) for this rank."""
    n, r = comm.size, comm.rank
    nxt, prev = (r + 1) % n, (r - 1) % n
    got: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    # A ring shift: every rank sends and receives, each helping its receiver.
    out = np.zeros(COUNT, np.int32)
    comm.sendrecv(data(r, 1), nxt, out, prev)
    got["ring"] = (out, data(prev, 1))

    # One way: rank 0 to rank 1; the others idle. The sender's only work is
    # writing chunks from the back while rank 1 reads from the front.
    if r == 0:
        comm.send(data(0, 2), 1)
    elif r == 1:
        out = np.zeros(COUNT, np.int32)
        comm.recv(out, 0)
        got["one way"] = (out, data(0, 2))

    # Two messages to one peer in one group, of different sizes: the second
    # goes once the first is done, in call order.
    if r in (0, 1):
        peer = 1 - r
        a, b = np.zeros(COUNT, np.int32), np.zeros(COUNT // 2 + 5, np.int32)
        with accl.group():
            comm.send(data(r, 3), peer)
            comm.send(data(r, 4, COUNT // 2 + 5), peer)
            comm.recv(a, peer)
            comm.recv(b, peer)
        got["two to one peer, first"] = (a, data(peer, 3))
        got["two to one peer, second"] = (b, data(peer, 4, COUNT // 2 + 5))

    # A receive into the buffer its own send of the call reads: rank 1 takes
    # rank 0's message into `buf` while it sends what `buf` held to rank 2.
    # Rank 0's send goes straight, rank 1 writes each chunk only once its own
    # send has taken it (and rank 0 writes none). Rank 2 comes late, so that
    # rank 1's send, through the slots, stops after the first 1 MiB: the
    # rest must wait for it.
    big = 4 * COUNT + 5
    if r == 1:
        buf = data(1, 5, big)
        with accl.group():
            comm.recv(buf, 0)
            comm.send(buf, 2)
        got["receive over its own send"] = (buf, data(0, 5, big))
    elif r == 0:
        comm.send(data(0, 5, big), 1)
    elif r == 2:
        time.sleep(0.3)
        out = np.zeros(big, np.int32)
        comm.recv(out, 1)
        got["receive over its own send, next"] = (out, data(1, 5, big))

    # The collectives made of sends and receives, with blocks of COUNT.
    blocks = np.concatenate([data(r, 10 + k) for k in range(n)])
    got["alltoall"] = (comm.alltoall(blocks), np.concatenate([data(k, 10 + r) for k in range(n)]))
    ip = blocks.copy()
    comm.alltoall(ip, ip)
    got["alltoall in place"] = (ip, np.concatenate([data(k, 10 + r) for k in range(n)]))
    g = comm.gather(data(r, 20), root=n - 1)
    if r == n - 1:
        got["gather"] = (g.reshape(-1), np.concatenate([data(k, 20) for k in range(n)]))
    s = comm.scatter(np.concatenate([data(r, 30 + k) for k in range(n)]), root=0)
    got["scatter"] = (s, data(0, 30 + r))
    return got


def mismatch(comm) -> str:
    """Rank 0 sends COUNT elements where rank 1 expects one more: the error
    each rank sees (the communicator is of no further use)."""
    try:
        if comm.rank == 0:
            comm.send(data(0, 40), 1)
        elif comm.rank == 1:
            comm.recv(np.zeros(COUNT + 1, np.int32), 0)
        else:
            return "idle"
    except accl.NcclError as e:
        return f"{type(e).__name__}: {e.last_warning}"
    return "no error"
