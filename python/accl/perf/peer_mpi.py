"""OpenMPI through mpi4py as a --compare peer: every collective of
collectives.py as the MPI call that does the same, on NumPy buffers."""

from __future__ import annotations

import functools

import numpy as np


class Mpi:
    name = "mpi"

    def __init__(self):
        from mpi4py import MPI

        import mpi4py

        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        lib = MPI.Get_library_version().strip().splitlines()[0].split(",")[0]
        self.version = f"{lib} (mpi4py {mpi4py.__version__})"
        self._ops = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}

    @staticmethod
    def in_place(collective: str) -> bool:
        """Whether the call works in place (MPI_Bcast), so that it is compared
        with ACCL's in-place time; every other call is out of place."""
        return collective == "broadcast"

    def prepare(self, collective: str, send: np.ndarray, recv: np.ndarray, op: str, root: int):
        """(a no-argument callable that runs the call once, the array that
        holds this rank's result). ValueError where MPI has no equivalent."""
        c, ops = self.comm, self._ops
        result = send if self.in_place(collective) else recv
        if collective in ("allreduce", "reducescatter", "reduce"):
            if op not in ops:
                raise ValueError(f"MPI has no {op} reduction")
            if send.dtype.kind not in "iuf" or send.dtype == np.float16:
                raise ValueError(f"MPI has no {send.dtype} reduction")
        else:  # only moves bytes: any datatype, as bytes
            send, recv = send.view(np.uint8), recv.view(np.uint8)
        nxt, prev = (self.rank + 1) % self.size, (self.rank - 1) % self.size
        # bound like ACCL's call (collectives.py): the loop pays only the API call
        call = {
            "allreduce": lambda: functools.partial(c.Allreduce, send, recv, ops.get(op)),
            "allgather": lambda: functools.partial(c.Allgather, send, recv),
            "reducescatter": lambda: functools.partial(c.Reduce_scatter_block, send, recv,
                                                       ops.get(op)),
            "broadcast": lambda: functools.partial(c.Bcast, send, root),
            "reduce": lambda: functools.partial(c.Reduce, send, recv, ops.get(op), root),
            "alltoall": lambda: functools.partial(c.Alltoall, send, recv),
            "gather": lambda: functools.partial(c.Gather, send, recv, root),
            "scatter": lambda: functools.partial(c.Scatter, send, recv, root),
            "sendrecv": lambda: functools.partial(c.Sendrecv, send, nxt, recvbuf=recv,
                                                  source=prev),
        }[collective]()
        return call, result

    def barrier(self) -> None:
        self.comm.Barrier()

    def allreduce_f64(self, x: float, op: str) -> float:
        return float(self.comm.allreduce(x, op=self._ops[op]))

    def close(self) -> None:
        pass
