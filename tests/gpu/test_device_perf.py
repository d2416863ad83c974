"""The CUDA executor through the perf drivers, on device buffers: several ranks
on one GPU as one thread's grouped calls (-g N) and as one thread per rank
(-t N), every datatype and op, CUDA graphs. The drivers check every result
against their own reference (#wrong); the table must be clean."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from nccl_table import Table

import accl

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "pytest-gpu-perf"
COLLS = ["all_reduce", "all_gather", "broadcast", "reduce", "reduce_scatter", "alltoall", "gather", "scatter",
         "sendrecv"]


@pytest.fixture(scope="module")
def drivers():
    """The drivers, built with the CUDA runtime against the installed libnccl.so.2."""
    if not shutil.which("cmake"):
        pytest.fail("cmake is required for the perf drivers")
    jobs = str(os.cpu_count() or 2)
    subprocess.run(["cmake", "-S", str(ROOT / "perf"), "-B", str(BUILD), f"-DNCCL_ROOT={accl.lib_dir()}",
                    "-DACCL_PERF_CUDA=ON", "-DCMAKE_BUILD_TYPE=Release"], check=True, timeout=600,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(BUILD), "-j", jobs], check=True, timeout=1200, stdout=subprocess.DEVNULL)
    return BUILD


def run(drivers, name, *args, timeout=180):
    env = dict(os.environ, NCCL_SOCKET_IFNAME="lo", ACCL_TIMEOUT="60", LD_LIBRARY_PATH=accl.lib_dir())
    p = subprocess.run([str(drivers / f"{name}_perf"), *map(str, args), "-T", "120"], capture_output=True, text=True,
                       timeout=timeout, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    t = Table(p.stdout)
    t.assert_clean()
    return t


@pytest.mark.parametrize("ranks", [["-g", "2"], ["-g", "3"], ["-t", "2"], ["-t", "2", "-g", "2"]],
                         ids=["g2", "g3", "t2", "t2g2"])
@pytest.mark.parametrize("name", COLLS)
def test_collective(drivers, name, ranks):
    t = run(drivers, name, "-b", "8", "-e", "8M", "-f", "8", "-n", "2", "-w", "1", "-c", "1", *ranks)
    assert len(t.rows) == 7


@pytest.mark.parametrize("name", ["all_reduce", "reduce", "reduce_scatter", "broadcast", "all_gather"])
def test_every_type_and_op(drivers, name):
    args = ["-b", "4", "-e", "1M", "-f", "64", "-n", "1", "-w", "0", "-c", "1", "-g", "2", "-d", "all"]
    if name in ("all_reduce", "reduce", "reduce_scatter"):
        args += ["-o", "all"]
    if name in ("reduce", "broadcast"):
        args += ["-r", "all"]
    run(drivers, name, *args, timeout=300)


def test_unaligned_counts(drivers):
    # Counts that leave a tail after the 16-byte vectors and uneven channel slices.
    run(drivers, "all_reduce", "-b", "3", "-e", "3000003", "-f", "10", "-n", "1", "-w", "0", "-c", "1", "-g", "3",
        "-d", "int8")


def test_cuda_graphs(drivers):
    run(drivers, "all_reduce", "-b", "8", "-e", "8M", "-f", "16", "-n", "2", "-w", "1", "-c", "1", "-g", "2", "-G", "5")


def test_one_rank(drivers):
    run(drivers, "all_reduce", "-b", "8", "-e", "64M", "-f", "8", "-n", "2", "-w", "1", "-c", "1", "-o", "all")


def test_eight_threads(drivers):
    run(drivers, "all_reduce", "-b", "8", "-e", "16M", "-f", "16", "-n", "2", "-w", "1", "-c", "1", "-t", "8")
