"""The benchmarked operations: how to run one and how busbw relates to algbw."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Collective:
    name: str
    has_op: bool  # takes a reduction op (else the redop column shows "none")
    root: int  # printed in the root column (-1: no root)
    bus_factor: Callable[[int], float]  # busbw = algbw * bus_factor(nranks)
    # prepare(comm, send, recv, op) -> a no-argument callable that runs the
    # operation once. The timed loop calls it, so an iteration costs one call
    # of the API (bound with functools.partial, in C) and nothing of ours; the
    # --compare peers time their libraries the same way (peers.py).
    prepare: Callable[[Any, np.ndarray, np.ndarray, str], Callable[[], Any]]

    def run(self, comm, send: np.ndarray, recv: np.ndarray, op: str) -> None:
        """The operation once (checks, probes)."""
        self.prepare(comm, send, recv, op)()


def _allreduce(comm, send: np.ndarray, recv: np.ndarray, op: str) -> Callable[[], Any]:
    return functools.partial(comm.allreduce, send, recv, op)


COLLECTIVES: dict[str, Collective] = {
    "allreduce": Collective("allreduce", True, -1, lambda n: 2.0 * (n - 1) / n, _allreduce),
}
