"""The benchmarked operations: how to run one and how busbw relates to algbw."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Collective:
    name: str
    has_op: bool  # takes a reduction op (else the redop column shows "none")
    root: int  # printed in the root column (-1: no root)
    bus_factor: Callable[[int], float]  # busbw = algbw * bus_factor(nranks)
    run: Callable  # run(comm, send, recv, op) -> None


def _allreduce(comm, send: np.ndarray, recv: np.ndarray, op: str) -> None:
    comm.allreduce(send, recv, op)


COLLECTIVES: dict[str, Collective] = {
    "allreduce": Collective("allreduce", True, -1, lambda n: 2.0 * (n - 1) / n, _allreduce),
}
