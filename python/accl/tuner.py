"""The tuner's cost model (docs/tuning.md), to compare its predictions with
measurements from ``python -m accl.perf``.

    >>> accl.tuner.predict("allreduce", "ring", 1 << 20, nranks=4)   # microseconds
    >>> accl.tuner.choose("allreduce", 8, nranks=16)                  # "tree"
"""

from __future__ import annotations

from . import _accl

COLLECTIVES = ("allreduce", "broadcast", "reduce", "allgather", "reducescatter", "sendrecv")

# The constants the model uses (src/coll/tuner.cc), for reference.
CONSTANTS = {
    "shm": {"alpha_us": 1.5, "gbps": 6.0},
    "net": {"alpha_us": 12.0, "gbps": 2.0},
}


def predict(collective: str, algorithm: str, nbytes: int, nranks: int, nhosts: int = 1) -> float:
    """Predicted microseconds for one call moving `nbytes` (count x element size)."""
    return _accl.tuner_predict(collective, algorithm, int(nbytes), int(nranks), int(nhosts))


def choose(collective: str, nbytes: int, nranks: int, nhosts: int = 1) -> str:
    """The algorithm ("ring", "tree" or "hier") the tuner picks when NCCL_ALGO allows every one."""
    return _accl.tuner_choose(collective, int(nbytes), int(nranks), int(nhosts))
