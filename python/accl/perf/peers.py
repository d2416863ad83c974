"""One rank of a peer library's run for ``--compare``: the same sweep, another library.

The launcher starts these ranks with ACCL_PERF_PEER=mpi (under ``mpirun``;
the rank times the MPI call that does the collective, e.g.
``MPI.COMM_WORLD.Allreduce``, on NumPy buffers through mpi4py: peer_mpi.py)
or ACCL_PERF_PEER=gloo (accl.perf's own launcher; the ``torch.distributed``
call, backend "gloo", on CPU tensors, ``init_method=tcp://127.0.0.1:<port>``:
peer_gloo.py). Buffers, inputs and expected results are those of
collectives.py, as for ACCL.
Timing is ACCL's: the ranks bound to CPUs as ACCL's are (--bind-to),
warm-up iterations, a barrier, ``time.perf_counter()`` around ``iters`` calls
of a prepared callable, the per-iteration time combined over ranks as -a
asks. Rank 0 writes the results as JSON to ACCL_PERF_PEER_OUT; nothing goes
to stdout. Nothing here imports accl's extension.
"""

from __future__ import annotations

import json
import os
import sys
import time


from . import binding, collectives, data, rendezvous, watchdog
from .collectives import COLLECTIVES, Collective
from .options import DATATYPES, Options

ENV_PEER = "ACCL_PERF_PEER"  # "mpi" or "gloo": this rank measures that library
ENV_PEER_OUT = "ACCL_PERF_PEER_OUT"  # rank 0 writes its JSON here
SLOW_SIZE_S = 2.0  # sizes slower than this get a progress line without --progress


def progress(tag: str, k: int, total: int, typename: str, op: str, nbytes: int,
             seconds: float, opts: Options) -> None:
    if opts.progress or seconds > SLOW_SIZE_S:
        sys.stderr.write(f"# [{k}/{total}] {tag}size {nbytes} B {typename} {op}: "
                         f"{seconds:.1f} s\n")
        sys.stderr.flush()


_TIME_OP = {0: "sum", 1: "sum", 2: "min", 3: "max"}


def _measure(lib, coll: Collective, opts: Options, dtype, op: str, size: int, arena) -> dict:
    root = opts.root if coll.rooted else -1
    c = coll.counts(size // dtype.itemsize, lib.size)
    send, recv = collectives.buffers(c, lib.rank, dtype, False, arena)
    send[...] = coll.input(lib.rank, c, dtype, op)
    call, result = lib.prepare(coll.name, send, recv, op, root)
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
        send[...] = coll.input(lib.rank, c, dtype, op)
        if result is not send:
            result[...] = 0
        call()
        want = coll.want(lib.rank, lib.size, root, c, dtype, op)
        mine = 0 if want is None else data.count_wrong(result, want, op)
        wrong = int(lib.allreduce_f64(float(mine), "sum"))
    return {"size": max(c.send, c.recv) * dtype.itemsize, "count": c.param, "type": None,
            "redop": op, "time_us": seconds * 1e6, "wrong": wrong}


def run(name: str, opts: Options, me: rendezvous.Identity) -> int:
    """Run this rank of peer `name`; rank 0 writes {version, rows, skipped} as JSON."""
    env_deadline = os.environ.get(rendezvous.ENV_DEADLINE)
    deadline = float(env_deadline) if env_deadline else time.time() + opts.timeout
    # Placed as ACCL's ranks are (binding.py; our mpirun runs with --bind-to
    # none), before any thread starts.
    binding.apply(opts.bind_to, me.rank, me.nranks)
    watchdog.start(me.rank, deadline, watch_parent=me.launcher == "accl.perf")
    coll = COLLECTIVES[opts.collective]
    if name == "mpi":
        from .peer_mpi import Mpi
        lib = Mpi()
    else:
        from .peer_gloo import Gloo
        lib = Gloo(me.rank, me.nranks)
    rows, skipped = [], []
    sizes = opts.sizes()
    ops = opts.ops if coll.has_op else ["none"]
    total = len(sizes) * len(opts.datatypes) * len(ops)
    arena = collectives.arena(max(sizes)) if sizes else None  # as ACCL's ranks sweep (worker.py)
    k = 0
    for typename in opts.datatypes:
        dtype = data.numpy_dtype(DATATYPES[typename])
        for op in ops:
            for size in sizes:
                k += 1
                t0 = time.monotonic()
                try:
                    row = _measure(lib, coll, opts, dtype, op, size, arena)
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
                  "in_place": lib.in_place(coll.name), "rows": rows, "skipped": skipped}
        if out:
            with open(out, "w") as f:
                json.dump(result, f)
        else:
            json.dump(result, sys.stdout)
            sys.stdout.write("\n")
    return 0
