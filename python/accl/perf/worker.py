"""One rank of a perf run: join the communicator, sweep sizes, time, check.

Only rank 0 prints. Times are per-iteration seconds from time.perf_counter
around `iters` back-to-back calls after a one-element allreduce as barrier,
combined over ranks as -a asks (average by default, like nccl-tests). Ranks
that accl.perf started are bound to CPUs first (--bind-to, binding.py).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

import accl
from accl import _accl

from . import binding, collectives, compare, data, devices, output, peers, rendezvous, table, watchdog
from .collectives import COLLECTIVES, Collective, Counts
from .options import DATATYPES, Options

_TIME_OP = {0: "sum", 1: "sum", 2: "min", 3: "max"}


def _barrier(comm) -> None:
    one = np.zeros(1, dtype=np.int32)
    comm.allreduce(one, one, "sum")


def _combine_time(comm, seconds: float, average: int) -> float:
    """The time every rank reports: rank 0's, the mean, the min or the max."""
    t = np.array([0.0 if (average == 0 and comm.rank != 0) else seconds])
    comm.allreduce(t, t, _TIME_OP[average])
    return float(t[0]) / (comm.size if average == 1 else 1)


def _sum_int(comm, value: int) -> int:
    v = np.array([value], dtype=np.int64)
    comm.allreduce(v, v, "sum")
    return int(v[0])


def _bench(comm, coll: Collective, send, recv, op: str, root: int, opts: Options) -> float:
    """Seconds per call: -w warm-up calls, a barrier, then -n timed calls (as
    nccl-tests, and as peers.py times the --compare libraries)."""
    call = coll.prepare(comm, send, recv, op, root)
    for _ in range(opts.warmup_iters):
        call()
    _barrier(comm)
    start = time.perf_counter()
    for _ in range(opts.iters):
        call()
    elapsed = (time.perf_counter() - start) / opts.iters
    return _combine_time(comm, elapsed, opts.average)


def _fill(coll: Collective, rank: int, c: Counts, send, recv, dtype, op: str) -> None:
    """Fresh inputs; the receive buffer zeroed first (in place, the input
    then overwrites its own block)."""
    if recv is not send:
        recv[...] = 0
    send[...] = coll.input(rank, c, dtype, op)


def _check(comm, coll: Collective, c: Counts, send, recv, want, dtype, op: str, root: int) -> int:
    """Run once on fresh inputs and count wrong elements (against `want`,
    None where this rank has no result) over all ranks."""
    _fill(coll, comm.rank, c, send, recv, dtype, op)
    coll.run(comm, send, recv, op, root)
    return _sum_int(comm, 0 if want is None else data.count_wrong(recv, want, op))


def _unsupported(comm, coll: Collective, dtype, op: str, root: int) -> str | None:
    """The library's reason if it refuses (dtype, op), else None.

    Argument checks fail the same way on every rank, so all ranks agree.
    """
    send, recv = collectives.buffers(coll.counts(comm.size, comm.size), comm.rank, dtype, False)
    try:
        coll.run(comm, send, recv, op, root)
    except (accl.InvalidUsageError, accl.InvalidArgumentError) as e:
        return e.last_warning or str(e)
    return None


def _measure_size(comm, coll: Collective, opts: Options, typename: str, dtype, op: str,
                  size: int, peer_rows: dict, arena=None) -> tuple[str, list[int | None], list[float], dict]:
    """One table row: out-of-place then in-place (then the peers' columns).

    Returns (row text, wrong counts, busbws, the row as a dict for --csv/--json).
    """
    n, root = comm.size, opts.root if coll.rooted else -1
    c = coll.counts(size // dtype.itemsize, n)
    nbytes = max(c.send, c.recv) * dtype.itemsize
    row = table.row_start(nbytes, c.param, typename, op, root)
    record = {"collective": coll.name, "nranks": n, "size": nbytes, "count": c.param,
              "type": typename, "redop": op, "root": root}
    # The expected result, once for both columns (n input patterns at large sizes).
    want = coll.want(comm.rank, n, root, c, dtype, op) if opts.check else None
    wrongs, busbws, times = [], [], []
    for in_place in (False, True):
        send, recv = collectives.buffers(c, comm.rank, dtype, in_place, arena)
        _fill(coll, comm.rank, c, send, recv, dtype, op)
        seconds = _bench(comm, coll, send, recv, op, root, opts)
        algbw = coll.algbw(c, dtype.itemsize, n, seconds)
        busbw = algbw * coll.bus_factor(n)
        checked = opts.check and (coll.check_in_place or not in_place)
        wrong = _check(comm, coll, c, send, recv, want, dtype, op, root) if checked else None
        row += table.row_part(seconds * 1e6, algbw, busbw, wrong)
        pre = "ip_" if in_place else ""
        record.update({f"{pre}time_us": seconds * 1e6, f"{pre}algbw": algbw,
                       f"{pre}busbw": busbw, f"{pre}wrong": wrong})
        wrongs.append(wrong)
        busbws.append(busbw)
        times.append(seconds * 1e6)
    for name in opts.compare:
        peer = peer_rows.get((name, typename, op, nbytes))
        peer_us = peer["time_us"] if peer else None
        ratio = peer_busbw = None
        if peer_us is not None:
            ours = times[1] if peer_rows.get(("in_place", name)) else times[0]
            ratio = peer_us / ours if ours > 0 else None
            peer_busbw = coll.algbw(c, dtype.itemsize, n, peer_us / 1e6) * coll.bus_factor(n)
        record[f"{name}_time_us"] = peer_us
        record[f"{name}_busbw"] = peer_busbw
        record[f"x_{name}"] = ratio
        if peer and peer.get("wrong"):
            record[f"{name}_wrong"] = peer["wrong"]
        row += table.compare_part(peer_us, ratio)
    return row, wrongs, busbws, record


def _arena(comm, nbytes: int, register: int):
    """The sweep's send and receive buffers (uint8, the largest size), made
    once as nccl-tests makes them, and their registrations (nccl-tests' -R):
    0 none; 1 ncclCommRegister; 2 ncclMemAlloc memory in windows registered
    with NCCL_WIN_COLL_SYMMETRIC, on which the ranks of one host run the
    direct collectives."""
    if nbytes == 0:
        return None, []
    if register == 2:
        send, recv = accl.mem_alloc(nbytes), accl.mem_alloc(nbytes)
        return (send, recv), [comm.register_window(send), comm.register_window(recv)]
    send, recv = collectives.arena(nbytes)
    return (send, recv), ([comm.register(send), comm.register(recv)] if register == 1 else [])


def _sweep(comm, coll: Collective, opts: Options, out,
           peer_rows: dict) -> tuple[int, list[float], list[dict]]:
    """Every datatype x op x size; returns (tests with wrong values, all busbws, rows)."""
    ops = opts.ops if coll.has_op else ["none"]
    sizes = opts.sizes()
    total = len(opts.datatypes) * len(ops) * len(sizes)
    arena, registrations = _arena(comm, max(sizes, default=0), opts.local_register)
    try:
        failed, busbws, records = _sweep_types(comm, coll, opts, out, peer_rows, ops, sizes, total, arena)
    finally:
        for r in registrations:  # collective, like the registration: every rank sweeps the same sizes
            r.deregister()
    return failed, busbws, records


def _sweep_types(comm, coll: Collective, opts: Options, out, peer_rows: dict, ops: list[str], sizes: list[int],
                 total: int, arena) -> tuple[int, list[float], list[dict]]:
    failed, busbws, records, k = 0, [], [], 0
    for typename in opts.datatypes:
        dtype = data.numpy_dtype(DATATYPES[typename])
        for op in ops:
            reason = _unsupported(comm, coll, dtype, op, opts.root)
            if reason is not None:
                if len(opts.datatypes) == 1 and len(ops) == 1:
                    message = f"accl.perf: {typename} {op}: {reason}"
                    raise SystemExit(message if comm.rank == 0 else 2)
                out(f"# {typename} {op}: skipped, the library refuses it: {reason}")
                k += len(sizes)
                continue
            for size in sizes:
                k += 1
                t0 = time.monotonic()
                row, wrongs, bws, record = _measure_size(comm, coll, opts, typename, dtype, op,
                                                         size, peer_rows, arena)
                out(row)
                if comm.rank == 0:
                    peers.progress("accl ", k, total, typename, op, record["size"],
                                   time.monotonic() - t0, opts)
                failed += sum(1 for w in wrongs if w)
                busbws += bws
                records.append(record)
    return failed, busbws, records


def run(opts: Options, me: rendezvous.Identity) -> int:
    """Run this rank; returns the process exit code (1 if any value was wrong)."""
    env_deadline = os.environ.get(rendezvous.ENV_DEADLINE)
    deadline = float(env_deadline) if env_deadline else time.time() + opts.timeout
    # Placement first: the watchdog thread (and the library's) inherit it.
    # Under a launcher of the user's own, placement is that launcher's.
    ours = me.launcher == "accl.perf"
    cpus = binding.apply(opts.bind_to, me.rank, me.nranks) if ours else None
    watchdog.start(me.rank, deadline, watch_parent=ours)
    coll = COLLECTIVES[opts.collective]
    try:
        uid = rendezvous.unique_id(me)
        with accl.Communicator(me.nranks, uid, me.rank) as comm:
            def out(line: str) -> None:
                if comm.rank == 0:
                    print(line, flush=True)

            if coll.rooted and not 0 <= opts.root < comm.size:
                message = f"accl.perf: -r {opts.root}: the root must be a rank, 0 to {comm.size - 1}"
                raise SystemExit(message if comm.rank == 0 else 2)
            _, reason = accl.query_mode()
            ranks = devices.gather(comm, reason)
            header_code = _accl.c_constants().get("NCCL_VERSION_CODE", 0)
            peer_results = compare.load() if opts.compare else None
            peer_rows: dict = {}
            if opts.compare and peer_results is None:
                out(f"# --compare {','.join(opts.compare)}: needs accl.perf's own launcher "
                    "(it runs the peers first); not compared under " + me.launcher)
            elif peer_results:
                peer_rows = compare.lookup(peer_results)
                for name, res in peer_results.items():
                    peer_rows[("in_place", name)] = bool(res.get("in_place"))
            bind_line = [binding.describe(opts.bind_to, cpus, me.nranks)] if ours else []
            for line in (table.preamble(coll.name, accl.__version__, header_code,
                                        accl.nccl_version(), opts)
                         + table.device_lines(ranks) + bind_line
                         + table.compare_header(table.header(), opts.compare)):
                out(line)
            failed, busbws, records = _sweep(comm, coll, opts, out, peer_rows)
            avg = sum(busbws) / len(busbws) if busbws else 0.0
            for line in table.footer(coll.name, failed, avg):
                out(line)
            if comm.rank == 0 and (opts.csv or opts.json or opts.plot):
                meta = {"collective": coll.name, "nranks": comm.size,
                        "accl_version": accl.__version__, "mode": reason,
                        "iters": opts.iters, "warmup_iters": opts.warmup_iters,
                        "local_register": opts.local_register,
                        "average": opts.average, "cpus": cpus,
                        "peers": {n: {k: v for k, v in r.items() if k != "rows"}
                                  for n, r in (peer_results or {}).items()}}
                output.write_all(opts, records, meta)
    except accl.NcclError as e:
        sys.stderr.write(f"accl.perf: rank {me.rank}: {e}\n")
        return 2
    return 1 if failed else 0
