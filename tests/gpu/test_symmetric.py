"""Direct collectives between processes on the one GPU, on buffers in windows
registered with NCCL_WIN_COLL_SYMMETRIC (symmetric_worker.py runs each rank;
the perf drivers with -R 2): under MPS, where the processes' kernels run at
once, and without it, where the GPU time-slices between them; a count that
differs between ranks fails with an error instead of reading past a buffer or
hanging, and a rank whose buffers lie outside the windows makes every rank
take the ring (right results, no hang). Each rank counts at destroy how its
calls ran."""
import os
from pathlib import Path

import pytest

pytest.importorskip("cupy")
import procs  # noqa: E402
from procs import ran  # noqa: E402

WORKER = Path(__file__).with_name("symmetric_worker.py")
# collectives(): 7 calls and 3 graph replays on windows, 1 on plain buffers
COLLECTIVES_RAN = (10, 1)


def run_procs(scenario, nranks, env, timeout=120):
    env = dict(env, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="COLL")
    return procs.run_procs(WORKER, scenario, nranks, env, timeout)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nranks", [2, 3])
def test_collectives_under_mps(mps, nranks):
    for out in run_procs("collectives", nranks, mps):
        assert ran(out) == COLLECTIVES_RAN, out[-3000:]


@pytest.mark.timeout(300)
def test_collectives_without_mps():
    for out in run_procs("collectives", 2, dict(os.environ), timeout=240):
        assert ran(out) == COLLECTIVES_RAN, out[-3000:]


@pytest.mark.timeout(300)
def test_a_count_that_differs_is_refused(mps):
    outs = run_procs("count_mismatch", 2, dict(mps, ACCL_TIMEOUT="60"))
    assert any("called a collective on" in out for out in outs), outs


@pytest.mark.timeout(300)
def test_a_rank_outside_the_windows_takes_everyone_to_the_ring(mps):
    for out in run_procs("one_outside", 2, dict(mps, ACCL_TIMEOUT="60")):
        assert ran(out) == (0, 1), out[-3000:]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name,extra", [("all_reduce", []), ("all_gather", []), ("reduce_scatter", []),
                                        ("broadcast", ["-r", "all"]), ("reduce", ["-r", "all"])])
def test_drivers_on_windows_under_mps(drivers, mps, name, extra):
    """nccl-tests' -R 2: every datatype and op, checked by the driver, at 2 and 4 processes, every call direct."""
    for np_ in (2, 4):
        counts = procs.run_driver(drivers / f"{name}_perf", np_,
                                  ["-b", "8", "-e", "4M", "-f", "16", "-n", "2", "-w", "1", "-c", "1", "-d", "all",
                                   "-o", "all", "-R", "2", "-T", "240"] + extra, mps)
        assert len(counts) == np_ and all(d > 0 and r == 0 for d, r in counts), counts
