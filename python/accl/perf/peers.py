"""One rank of a peer library's run for ``--compare``: the same sweep, another library.

The launcher starts these ranks with ACCL_PERF_PEER=mpi (under ``mpirun``;
the rank times ``MPI.COMM_WORLD.Allreduce`` on NumPy buffers, mpi4py) or
ACCL_PERF_PEER=gloo (accl.perf's own launcher; ``torch.distributed`` with
backend "gloo" on CPU tensors, ``init_method=tcp://127.0.0.1:<port>``).
Timing is ACCL's: the ranks bound to CPUs as ACCL's are (--bind-to),
warm-up iterations, a barrier, ``time.perf_counter()`` around ``iters`` calls
of a prepared callable, the per-iteration time combined over ranks as -a
asks. Rank 0 writes the results as JSON to ACCL_PERF_PEER_OUT; nothing goes
to stdout. Nothing here imports accl's extension.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time

import numpy as np

from . import binding, data, rendezvous, watchdog
from .options import DATATYPES, Options

ENV_PEER = "ACCL_PERF_PEER"  # "mpi" or "gloo": this rank measures that library
ENV_PEER_OUT = "ACCL_PERF_PEER_OUT"  # rank 0 writes its JSON here
ENV_GLOO_PORT = "ACCL_PERF_GLOO_PORT"
SLOW_SIZE_S = 2.0  # sizes slower than this get a progress line without --progress


def progress(tag: str, k: int, total: int, typename: str, op: str, nbytes: int,
             seconds: float, opts: Options) -> None:
    if opts.progress or seconds > SLOW_SIZE_S:
        sys.stderr.write(f"# [{k}/{total}] {tag}size {nbytes} B {typename} {op}: "
                         f"{seconds:.1f} s\n")
        sys.stderr.flush()


class _Mpi:
    name = "mpi"
    in_place = False  # MPI_Allreduce(send, recv): compared with ACCL's out-of-place time

    def __init__(self):
        from mpi4py import MPI

        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        lib = MPI.Get_library_version().strip().splitlines()[0].split(",")[0]
        import mpi4py

        self.version = f"{lib} (mpi4py {mpi4py.__version__})"
        self._ops = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}

    def prepare(self, array: np.ndarray, op: str):
        if op not in self._ops:
            raise ValueError(f"MPI has no {op} reduction")
        if array.dtype.kind not in "iuf" or array.dtype == np.float16:
            raise ValueError(f"MPI has no {array.dtype} datatype")
        recv = np.zeros_like(array)
        # bound like ACCL's call (collectives.py): the loop pays only the API call
        return functools.partial(self.comm.Allreduce, array, recv, self._ops[op]), recv

    def barrier(self) -> None:
        self.comm.Barrier()

    def allreduce_f64(self, x: float, op: str) -> float:
        return float(self.comm.allreduce(x, op=self._ops[op]))

    def close(self) -> None:
        pass


class _Gloo:
    name = "gloo"
    in_place = True  # torch.distributed.all_reduce works in place: compared with in-place

    def __init__(self, me: rendezvous.Identity):
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        if not dist.is_available() or not dist.is_gloo_available():
            raise RuntimeError("this torch has no gloo backend")
        port = os.environ[ENV_GLOO_PORT]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                                rank=me.rank, world_size=me.nranks)
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.version = f"Gloo (torch {torch.__version__})"
        R = dist.ReduceOp
        self._ops = {"sum": R.SUM, "prod": R.PRODUCT, "max": R.MAX, "min": R.MIN}

    def prepare(self, array: np.ndarray, op: str):
        if op not in self._ops:
            raise ValueError(f"gloo has no {op} reduction")
        if array.dtype.kind not in "iuf":
            raise ValueError(f"torch has no {array.dtype} from NumPy")
        tensor = self.torch.from_numpy(array)  # shares `array`: the result lands there
        return functools.partial(self.dist.all_reduce, tensor, self._ops[op]), array

    def barrier(self) -> None:
        self.dist.barrier()

    def allreduce_f64(self, x: float, op: str) -> float:
        t = self.torch.tensor([x], dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self._ops[op])
        return float(t[0])

    def close(self) -> None:
        self.dist.destroy_process_group()


_TIME_OP = {0: "sum", 1: "sum", 2: "min", 3: "max"}


def _measure(lib, opts: Options, dtype, op: str, size: int) -> dict:
    count = size // dtype.itemsize
    index = np.arange(count, dtype=np.int64)
    send = data.fill(lib.rank, index, dtype, op)
    call, result = lib.prepare(send, op)
    for _ in range(opts.warmup_iters):
        call()
    lib.barrier()
    start = time.perf_counter()
    for _ in range(opts.iters):
        call()
    elapsed = (time.perf_counter() - start) / opts.iters
    mine = 0.0 if (opts.average == 0 and lib.rank != 0) else elapsed
    seconds = lib.allreduce_f64(mine, _TIME_OP[opts.average])
    seconds /= lib.size if opts.average == 1 else 1
    wrong = None
    if opts.check:
        send[...] = data.fill(lib.rank, index, dtype, op)
        if result is not send:
            result[...] = 0
        call()
        want = data.expected(lib.size, index, dtype, op)
        wrong = int(lib.allreduce_f64(float(data.count_wrong(result, want, op)), "sum"))
    return {"size": count * dtype.itemsize, "count": count, "type": None, "redop": op,
            "time_us": seconds * 1e6, "wrong": wrong}


def run(name: str, opts: Options, me: rendezvous.Identity) -> int:
    """Run this rank of peer `name`; rank 0 writes {version, rows, skipped} as JSON."""
    env_deadline = os.environ.get(rendezvous.ENV_DEADLINE)
    deadline = float(env_deadline) if env_deadline else time.time() + opts.timeout
    # Placed as ACCL's ranks are (binding.py; our mpirun runs with --bind-to
    # none), before any thread starts.
    binding.apply(opts.bind_to, me.rank, me.nranks)
    watchdog.start(me.rank, deadline, watch_parent=me.launcher == "accl.perf")
    lib = _Mpi() if name == "mpi" else _Gloo(me)
    rows, skipped = [], []
    sizes = opts.sizes()
    total = len(sizes) * len(opts.datatypes) * len(opts.ops)
    k = 0
    for typename in opts.datatypes:
        dtype = data.numpy_dtype(DATATYPES[typename])
        for op in opts.ops:
            for size in sizes:
                k += 1
                t0 = time.monotonic()
                try:
                    row = _measure(lib, opts, dtype, op, size)
                except (ValueError, TypeError, RuntimeError) as e:
                    # the same refusal on every rank (it comes before any communication)
                    skipped.append({"type": typename, "redop": op, "reason": str(e)})
                    k += len(sizes) - sizes.index(size) - 1
                    break
                row["type"] = typename
                rows.append(row)
                if lib.rank == 0:
                    progress(f"{name} ", k, total, typename, op, row["size"],
                             time.monotonic() - t0, opts)
    lib.close()
    if lib.rank == 0:
        out = os.environ.get(ENV_PEER_OUT)
        result = {"name": name, "version": lib.version, "nranks": lib.size,
                  "in_place": lib.in_place, "rows": rows, "skipped": skipped}
        if out:
            with open(out, "w") as f:
                json.dump(result, f)
        else:
            json.dump(result, sys.stdout)
            sys.stdout.write("\n")
    return 0
