"""--bind-to: each local rank on its own CPU, as mpirun places its ranks.

mpirun binds every rank to a core by default (Open MPI: to a core for up to
2 ranks, to a package above). Unbound, two ranks that take turns on shared
memory are often put on one CPU by the scheduler (it moves a woken task next
to the one that woke it), and each call then costs context switches instead of
a cache-line hand-over: on a 2-core VM an 8 B allreduce took 4.6-5 us that
way against 0.85 us on two CPUs. So every rank accl.perf starts binds itself
the same way: ACCL's, the gloo peer's, and the mpi peer's (whose mpirun is
told `--bind-to none` so that this code, not mpirun, places them), and every
library is timed with the same placement. Under a launcher of the user's own
(their mpirun) placement is left to that launcher.

Each rank works out its own CPU from the affinity it inherited from the
launcher, so no launcher state is needed: rank r takes the r-th allowed CPU.
"""

from __future__ import annotations

import os

MODES = ["core", "none"]


def allowed_cpus() -> list[int]:
    """The CPUs this process may run on, ascending ([] where the OS cannot say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return []


def plan(mode: str, nranks: int) -> list[int] | None:
    """The CPU of each rank, or None where ranks stay unbound (--bind-to none,
    more ranks than CPUs, or an OS without affinity)."""
    cpus = allowed_cpus()
    if mode != "core" or not cpus or nranks > len(cpus):
        return None
    return cpus[:nranks]


def apply(mode: str, rank: int, nranks: int) -> list[int] | None:
    """Bind this process (rank `rank` of `nranks` local ranks) as plan() says;
    returns the plan. Call it before any thread starts (threads inherit it)."""
    cpus = plan(mode, nranks)
    if cpus is not None:
        try:
            os.sched_setaffinity(0, {cpus[rank]})
        except OSError:  # a restricted container: run unbound rather than fail
            return None
    return cpus


def describe(mode: str, cpus: list[int] | None, nranks: int) -> str:
    """The '#' line saying where the ranks run."""
    if cpus is not None:
        return (f"# Ranks bound to CPUs {','.join(map(str, cpus))}, rank r to the r-th "
                "(--bind-to core, as mpirun binds; --compare peers' ranks too)")
    if mode == "none":
        why = "--bind-to none"
    elif not allowed_cpus():
        why = "this OS gives no CPU affinity"
    elif nranks > len(allowed_cpus()):
        why = f"{nranks} ranks, {len(allowed_cpus())} CPUs allowed"
    else:
        why = "sched_setaffinity was refused"
    return f"# Ranks not bound to CPUs ({why})"
