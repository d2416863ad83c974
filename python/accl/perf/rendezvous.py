"""Who this process is: rank, number of ranks and the unique id, from the environment.

Set by accl.perf's own launcher (ACCL_PERF_*), or by an MPI-style launcher
(OMPI_COMM_WORLD_*, PMI_*). Under a foreign launcher the ranks agree on the
id through ACCL_PERF_UID (hex) or NCCL_COMM_ID, as NCCL programs do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

ENV_RANK = "ACCL_PERF_RANK"
ENV_NRANKS = "ACCL_PERF_NRANKS"
ENV_UID = "ACCL_PERF_UID"  # the unique id, hex
ENV_UID_FD = "ACCL_PERF_UID_FD"  # rank 0 writes the id's hex here for the launcher
ENV_DEADLINE = "ACCL_PERF_DEADLINE"  # time.time() after which a rank gives up

_FOREIGN = [
    ("mpirun (Open MPI)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI", "PMI_RANK", "PMI_SIZE"),
]


@dataclass(frozen=True)
class Identity:
    rank: int
    nranks: int
    launcher: str


def identity() -> Identity | None:
    """This process's place in the run; None when no launcher started it."""
    env = os.environ
    if ENV_RANK in env:
        return Identity(int(env[ENV_RANK]), int(env[ENV_NRANKS]), "accl.perf")
    for name, rank_var, size_var in _FOREIGN:
        if rank_var in env and size_var in env:
            return Identity(int(env[rank_var]), int(env[size_var]), name)
    return None


def unique_id(me: Identity) -> bytes:
    """The id shared by all ranks; rank 0 creates it where nobody else can."""
    import accl

    env = os.environ
    if env.get(ENV_UID):
        return bytes.fromhex(env[ENV_UID])
    if me.rank == 0 and ENV_UID_FD in env:
        uid = accl.get_unique_id()
        fd = int(env.pop(ENV_UID_FD))
        os.write(fd, (uid.hex() + "\n").encode())
        os.close(fd)
        return uid
    if me.nranks == 1 or "NCCL_COMM_ID" in env:
        return accl.get_unique_id()
    raise SystemExit(f"accl.perf: started by {me.launcher} with {me.nranks} ranks but no way to "
                     f"share the unique id: set NCCL_COMM_ID=<host>:<port> or {ENV_UID}=<hex>")
