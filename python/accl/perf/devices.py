"""Who runs where: one record per rank, gathered with the library itself.

Each rank writes its record into its own slot of a zeroed byte array and the
ranks sum-allreduce it, which is an allgather for bytes.
"""

from __future__ import annotations

import os
import socket

import numpy as np

_HOST = 64     # bytes kept of the host name
_REASON = 128  # and of the mode reason (the library's are shorter)
_SLOT = 16 + _HOST + _REASON


def _encode(text: str, size: int) -> bytes:
    return text.encode("utf-8", "replace")[:size].ljust(size, b"\0")


def _decode(raw: bytes) -> str:
    return raw.rstrip(b"\0").decode("utf-8", "replace")


def gather(comm, mode_reason: str) -> list[dict]:
    """[{rank, pid, device, host, mode}] for every rank, in rank order."""
    buf = np.zeros(comm.size * _SLOT, dtype=np.uint8)
    mine = buf[comm.rank * _SLOT:(comm.rank + 1) * _SLOT]
    mine[:16] = np.frombuffer(np.array([os.getpid(), comm.device], dtype=np.int64).tobytes(),
                              dtype=np.uint8)
    mine[16:16 + _HOST] = np.frombuffer(_encode(socket.gethostname(), _HOST), dtype=np.uint8)
    mine[16 + _HOST:] = np.frombuffer(_encode(mode_reason, _REASON), dtype=np.uint8)
    comm.allreduce(buf, buf, "sum")
    out = []
    for rank in range(comm.size):
        slot = buf[rank * _SLOT:(rank + 1) * _SLOT].tobytes()
        pid, device = np.frombuffer(slot[:16], dtype=np.int64)
        out.append({"rank": rank, "pid": int(pid), "device": int(device),
                    "host": _decode(slot[16:16 + _HOST]), "mode": _decode(slot[16 + _HOST:])})
    return out
