"""Direct collectives between processes on the one GPU on plain cudaMalloc
buffers registered with ncclCommRegister (registered_worker.py runs each rank;
the perf drivers with -R 1), under MPS: the kernels take the direct algorithm
when every rank has mapped the buffers the call needs and agree on the ring
otherwise, so a rank that registered nothing, or a registration its peers have
not seen yet, still gets right results. Each rank counts at destroy how its
calls ran, which the tests compare with what the worker expects."""
import re
from pathlib import Path

import pytest

pytest.importorskip("cupy")
import procs  # noqa: E402
from procs import ran  # noqa: E402

WORKER = Path(__file__).with_name("registered_worker.py")
DRIVER_ARGS = ["-b", "8", "-e", "4M", "-f", "16", "-n", "2", "-w", "1", "-c", "1", "-T", "240"]


def run_procs(scenario, nranks, env, timeout=180):
    env = dict(env, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,COLL", ACCL_TIMEOUT="60")
    return procs.run_procs(WORKER, scenario, nranks, env, timeout)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("scenario,nranks", [("registered", 2), ("registered", 3), ("one_unregistered", 2)])
def test_registered_buffers(mps, scenario, nranks):
    for out in run_procs(scenario, nranks, mps):
        want = re.search(r"expect (\d+) direct, (\d+) ring", out)
        assert want, out[-3000:]
        assert ran(out) == (int(want.group(1)), int(want.group(2))), out[-3000:]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name,extra", [("all_reduce", []), ("all_gather", []), ("reduce_scatter", []),
                                        ("broadcast", ["-r", "all"]), ("reduce", ["-r", "all"])])
def test_drivers_on_registered_buffers_under_mps(drivers, mps, name, extra):
    """nccl-tests' -R 1: every datatype and op, checked by the driver, at 2 and
    4 processes; the ring only before every rank saw the others' registrations
    (the first size)."""
    for np_ in (2, 4):
        counts = procs.run_driver(drivers / f"{name}_perf", np_, DRIVER_ARGS + ["-d", "all", "-o", "all", "-R", "1"] +
                                  extra, mps)
        assert len(counts) == np_ and all(d > 0 and r <= 16 for d, r in counts), counts


@pytest.mark.timeout(300)
@pytest.mark.parametrize("register", ["1", "2"])
def test_drivers_two_ranks_per_process_under_mps(drivers, mps, register):
    """2 processes of 2 ranks each (-g 2): ranks of one process reach each
    other's slots and buffers at their addresses, the others through CUDA IPC."""
    counts = procs.run_driver(drivers / "all_reduce_perf", 2, DRIVER_ARGS + ["-g", "2", "-R", register], mps, 250)
    assert len(counts) == 4 and all(d > 0 and r <= 16 for d, r in counts), counts


@pytest.mark.timeout(300)
@pytest.mark.parametrize("var,value", [("NCCL_ALGO", "ring"), ("ACCL_DIRECT", "0")])
def test_nccl_algo_or_accl_direct_keeps_the_ring(drivers, mps, var, value):
    """NCCL_ALGO names only NCCL's algorithms, so once set every call takes
    one of them, as ACCL_DIRECT=0 asks: registered buffers then run on the
    ring, with right results (the driver checks them); the ranks set up no
    direct collectives, and say why."""
    log = procs.mpirun_driver(drivers / "all_reduce_perf", 2, DRIVER_ARGS + ["-R", "1"], mps, 250,
                              NCCL_DEBUG_SUBSYS="INIT,COLL", **{var: value})
    assert "no direct collectives: rank 0 runs with ACCL_DIRECT=0 or NCCL_ALGO" in log, log[-6000:]
    assert "direct collectives on symmetric windows and registered buffers" not in log, log[-6000:]
