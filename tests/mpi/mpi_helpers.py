"""Helpers for the mpirun suite (tests/mpi): the MPI world, deterministic
inputs, and the rule that keeps the ranks in step.

The rule: a test first runs every collective it needs (ACCL's, then MPI's
reference), catching exceptions instead of raising, then compares, then
`agree()` allgathers every rank's list of errors over MPI and raises the same
AssertionError on every rank (naming the ranks) if any rank found one, after
a barrier. So all ranks pass or fail each test together, run the same test
sequence, and rank 0's pytest output reports every rank's failures.
"""
from __future__ import annotations

import os
import traceback

import numpy as np

ENV_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE")


def env_world_size() -> int:
    """The MPI world size as mpirun announces it in the environment (1 when not under mpirun)."""
    for v in ENV_SIZE_VARS:
        if os.environ.get(v, "").isdigit():
            return int(os.environ[v])
    return 1


SKIP_REASON = ("tests/mpi needs an MPI world of 2 or more ranks: "
               "mpirun -np 2 python -m pytest tests/mpi (see docs/testing-mpi.md)")


def attempt(fn):
    """(result, None) or (None, 'ExcType: message') -- never raises, so that ranks stay in step."""
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001 -- reported by agree()
        return None, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}"


def agree(mpi_comm, errors: list[str], what: str = "") -> None:
    """Collective over mpi_comm: raise (on every rank) if any rank reported errors."""
    all_errors = mpi_comm.allgather(list(errors))
    mpi_comm.Barrier()
    bad = [(r, e) for r, e in enumerate(all_errors) if e]
    if bad:
        lines = [f"{what}: {len(bad)} of {mpi_comm.Get_size()} ranks failed"]
        for r, errs in bad:
            for e in errs[:6]:
                lines.append(f"  rank {r}: {e}")
            if len(errs) > 6:
                lines.append(f"  rank {r}: ... {len(errs) - 6} more")
        raise AssertionError("\n".join(lines))


def raw(a: np.ndarray) -> np.ndarray:
    """The bytes of an array, as uint8 (for MPI.BYTE data movement of any dtype)."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def compare(got, want: np.ndarray, what: str, errors: list[str], atol: float = 0.0) -> None:
    """Exact (by value; -0 == +0) unless atol; appends a readable message to errors."""
    if got is None:
        errors.append(f"{what}: no result")
        return
    got = np.asarray(got)
    if got.dtype != want.dtype:
        errors.append(f"{what}: dtype {got.dtype}, want {want.dtype}")
        return
    if got.size != want.size:
        errors.append(f"{what}: {got.size} elements, want {want.size}")
        return
    g = got.reshape(-1)
    w = want.reshape(-1)
    if g.dtype.kind in "iu":
        bad = g != w
    else:
        gf, wf = g.astype(np.float64), w.astype(np.float64)
        bad = (np.abs(gf - wf) > atol) if atol else (gf != wf)
        bad |= np.isnan(gf) != np.isnan(wf)
    if bad.any():
        idx = np.flatnonzero(bad)[:6]
        errors.append(f"{what}: {int(bad.sum())}/{g.size} wrong, e.g. at {idx.tolist()}: "
                      f"got {g[idx].tolist()} want {w[idx].tolist()}" + (f" (atol {atol})" if atol else ""))
