"""A communicator made from another (ncclCommSplit) when the rank that makes
its unique id cannot: every rank of the parent fails at once with an error
that names that rank, none waits for it until ACCL_TIMEOUT."""
from __future__ import annotations

import textwrap
import time

import numpy as np
import pytest

import accl
from test_multiprocess import RANK_PREAMBLE, _run_ranks

pytestmark = pytest.mark.skipif(accl.query_mode()[0], reason="host mode test")

# Rank 0, the first of the new communicator, runs out of descriptors just
# before the split: it cannot open the new id's listener.
SCRIPT = RANK_PREAMBLE + textwrap.dedent("""
    import resource, time
    comm = accl.Communicator(nranks, uid, rank)
    comm.allreduce(np.ones(4, np.float32))  # every connection the split needs is made
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if rank == 0:
        probe = os.open(os.devnull, os.O_RDONLY)  # the lowest free descriptor: none from it on
        os.close(probe)
        resource.setrlimit(resource.RLIMIT_NOFILE, (probe, hard))
    try:
        child = comm.split(0)
        error = "no error"
    except accl.NcclError as e:
        error = f"{type(e).__name__}: {e}"
    if rank == 0:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    np.savez(out, error=np.array(error))
    if rank == 0:  # alive, as an application that goes on would be, until the others are done
        others = [out.replace("rank0.npz", f"rank{r}.npz") for r in range(1, nranks)]
        deadline = time.monotonic() + 60
        while not all(os.path.exists(o) for o in others) and time.monotonic() < deadline:
            time.sleep(0.05)
    os._exit(0)  # no teardown with rank 0 out of descriptors
""")


@pytest.mark.timeout(60)
def test_split_whose_first_rank_cannot_make_the_id_fails_everywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCL_TIMEOUT", "120")  # a rank left waiting would outlast the test
    t0 = time.monotonic()
    outs = _run_ranks(3, tmp_path, timeout=40.0, script=SCRIPT)
    errors = [str(np.load(o)["error"]) for o in outs]
    assert time.monotonic() - t0 < 40
    assert errors[0].startswith("NcclSystemError"), errors
    for r in (1, 2):
        assert errors[r].startswith("NcclSystemError") and "rank 0" in errors[r] and "unique id" in errors[r], errors
