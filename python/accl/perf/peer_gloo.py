"""Gloo through torch.distributed as a --compare peer: every collective of
collectives.py as the torch.distributed call that does the same, on CPU
tensors that share the NumPy buffers."""

from __future__ import annotations

import functools
import os

import numpy as np

ENV_GLOO_PORT = "ACCL_PERF_GLOO_PORT"


class Gloo:
    name = "gloo"

    def __init__(self, rank: int, nranks: int):
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        if not dist.is_available() or not dist.is_gloo_available():
            raise RuntimeError("this torch has no gloo backend")
        port = os.environ[ENV_GLOO_PORT]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                                rank=rank, world_size=nranks)
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.version = f"Gloo (torch {torch.__version__})"
        R = dist.ReduceOp
        self._ops = {"sum": R.SUM, "prod": R.PRODUCT, "max": R.MAX, "min": R.MIN}

    @staticmethod
    def in_place(collective: str) -> bool:
        """all_reduce, broadcast and reduce work in place: compared with ACCL's
        in-place time; the others with its out-of-place time."""
        return collective in ("allreduce", "broadcast", "reduce")

    def prepare(self, collective: str, send: np.ndarray, recv: np.ndarray, op: str, root: int):
        """(a no-argument callable that runs the call once, the array that
        holds this rank's result). ValueError where Gloo has no equivalent."""
        dist, n = self.dist, self.size
        result, red = (send if self.in_place(collective) else recv), None
        if collective in ("allreduce", "reducescatter", "reduce"):
            if op not in self._ops:
                raise ValueError(f"gloo has no {op} reduction")
            if send.dtype.kind not in "iuf":
                raise ValueError(f"torch has no {send.dtype} from NumPy")
            red = self._ops[op]
        else:  # only moves bytes: any datatype, as bytes
            send, recv = send.view(np.uint8), recv.view(np.uint8)
        # tensors share the arrays: results land in them
        s, r = self.torch.from_numpy(send), self.torch.from_numpy(recv)
        blocks = None  # gather's outputs, scatter's inputs: views of the root's buffer
        if collective in ("gather", "scatter") and self.rank == root:
            whole = r if collective == "gather" else s
            blocks = list(whole.view(n, whole.numel() // n).unbind(0))
        # torch 2.13 renamed the tensor forms; older ones have the old names
        gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        if collective == "sendrecv":
            nxt, prev = (self.rank + 1) % n, (self.rank - 1) % n

            def call():
                reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, s, nxt),
                                               dist.P2POp(dist.irecv, r, prev)])
                for q in reqs:
                    q.wait()
        else:
            call = {
                "allreduce": lambda: functools.partial(dist.all_reduce, s, red),
                "allgather": lambda: functools.partial(gather_single, r, s),
                "reducescatter": lambda: functools.partial(scatter_single, r, s, red),
                "broadcast": lambda: functools.partial(dist.broadcast, s, root),
                "reduce": lambda: functools.partial(dist.reduce, s, root, red),
                "alltoall": lambda: functools.partial(dist.all_to_all_single, r, s),
                "gather": lambda: functools.partial(dist.gather, s, blocks, root),
                "scatter": lambda: functools.partial(dist.scatter, r, blocks, root),
            }[collective]()
        return call, result

    def barrier(self) -> None:
        self.dist.barrier()

    def allreduce_f64(self, x: float, op: str) -> float:
        t = self.torch.tensor([x], dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self._ops[op])
        return float(t[0])

    def close(self) -> None:
        self.dist.destroy_process_group()
