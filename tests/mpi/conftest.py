"""Fixtures of the mpirun suite: one ACCL communicator per transport (shm, then
socket via a per-rank NCCL_HOSTID), built from a unique id that rank 0 makes
and MPI broadcasts. Under plain `pytest tests` (no mpirun, or a 1-rank world)
every test here is skipped with the reason below. See docs/testing-mpi.md."""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

import mpi_helpers

IN_WORLD = mpi_helpers.env_world_size() > 1
TEST_TIMEOUT = int(os.environ.get("ACCL_MPI_TEST_TIMEOUT", "120"))
TRANSPORTS = [t for t in os.environ.get("ACCL_MPI_TRANSPORTS", "shm,socket").split(",") if t]


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    for item in items:
        if here not in Path(str(item.fspath)).resolve().parents:
            continue
        if not IN_WORLD:
            item.add_marker(pytest.mark.skip(reason=mpi_helpers.SKIP_REASON))
        else:
            # method=thread: a rank stuck inside a C call (GIL released) still gets
            # its stacks dumped and exits, and mpirun then stops the others.
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT, method="thread"))


@pytest.fixture(scope="session")
def mpi():
    from mpi4py import MPI

    return MPI


@pytest.fixture(scope="session")
def world(mpi):
    w = mpi.COMM_WORLD
    # MPI is the reference, so it must itself be right: Open MPI 4.1's op/avx
    # component saturates 8-bit integer sums (200 + 200 gives 255, not 144).
    import numpy as np

    x = np.full(64, 200, np.uint8)
    y = np.empty_like(x)
    w.Allreduce([x, mpi.UINT8_T], [y, mpi.UINT8_T], op=mpi.SUM)
    want = (200 * w.Get_size()) % 256
    if not (y == want).all():
        pytest.fail(f"MPI_Allreduce(uint8 sum) gives {int(y[0])}, not {want} (wrapped): this MPI's reference "
                    "is wrong; with Open MPI disable the AVX op component: OMPI_MCA_op=^avx "
                    "(mpirun --mca op ^avx). See docs/testing-mpi.md", pytrace=False)
    return w


def _reset_params():
    import accl

    # The library caches its parameters (NCCL_HOSTID, NCCL_DEBUG*, ...) at first
    # use; ncclResetDebugInit re-reads them. ctypes opens the same libnccl.so.2
    # that the extension uses (same file, already loaded).
    ctypes.CDLL(accl.library_path()).ncclResetDebugInit()


@pytest.fixture(scope="session", params=TRANSPORTS)
def transport(request):
    return request.param


@pytest.fixture(scope="session")
def log_dir(world, tmp_path_factory):
    # One directory, named by rank 0, shared by every rank (all on this host or a shared fs).
    d = world.bcast(str(tmp_path_factory.mktemp("accl-mpi-logs")) if world.rank == 0 else None, root=0)
    Path(d).mkdir(parents=True, exist_ok=True)
    return Path(d)


@pytest.fixture(scope="session")
def comm(transport, world, log_dir):
    """accl.Communicator over MPI_COMM_WORLD's ranks for `transport` ('shm' or 'socket')."""
    import accl

    saved = {k: os.environ.get(k) for k in ("NCCL_HOSTID", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")}
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    os.environ.setdefault("ACCL_TIMEOUT", "30")  # a diverged rank gives ncclTimeout, not a hang
    if transport == "socket":
        os.environ["NCCL_HOSTID"] = f"accl-mpi-rank-{world.rank}"  # every rank its own "host"
    else:
        os.environ.pop("NCCL_HOSTID", None)
    # INIT logging to a file records which transport each connection took (test_transport).
    os.environ["NCCL_DEBUG"] = "INFO"
    os.environ["NCCL_DEBUG_SUBSYS"] = "INIT"
    os.environ["NCCL_DEBUG_FILE"] = str(log_dir / f"{transport}-rank{world.rank}.log")
    _reset_params()
    uid = world.bcast(accl.get_unique_id() if world.rank == 0 else None, root=0)
    c, err = mpi_helpers.attempt(lambda: accl.Communicator(world.size, uid, world.rank))
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    _reset_params()
    mpi_helpers.agree(world, [err] if err else [], f"accl.Communicator({transport})")
    yield c
    world.Barrier()
    c.destroy()
    world.Barrier()
