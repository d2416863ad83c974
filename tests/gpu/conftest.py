"""GPU suites: they run where ACCL was built with the CUDA executor
(ACCL_DEVICE_KERNELS=ON) and a GPU is visible, and skip cleanly elsewhere."""
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import accl

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "pytest-gpu-perf"


def pytest_collection_modifyitems(config, items):
    on_gpu, reason = accl.query_mode()
    for item in items:
        if "tests/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)
            if not on_gpu:
                item.add_marker(pytest.mark.skip(reason=f"no device mode here: {reason}"))


@pytest.fixture(scope="session")
def drivers():
    """The perf drivers, built with the CUDA runtime against the installed libnccl.so.2."""
    if not shutil.which("cmake"):
        pytest.fail("cmake is required for the perf drivers")
    jobs = str(os.cpu_count() or 2)
    subprocess.run(["cmake", "-S", str(ROOT / "perf"), "-B", str(BUILD), f"-DNCCL_ROOT={accl.lib_dir()}",
                    "-DACCL_PERF_CUDA=ON", "-DCMAKE_BUILD_TYPE=Release"], check=True, timeout=600,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(BUILD), "-j", jobs], check=True, timeout=1200, stdout=subprocess.DEVNULL)
    return BUILD


@pytest.fixture(scope="module")
def mps(tmp_path_factory):
    """A private MPS control daemon (its own pipe and log directories): the
    environment that makes a process its client; stopped after the module."""
    control = shutil.which("nvidia-cuda-mps-control")
    if not control or not shutil.which("mpirun"):
        pytest.skip("no nvidia-cuda-mps-control or no mpirun")
    root = tmp_path_factory.mktemp("mps")
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(root / "pipe"), CUDA_MPS_LOG_DIRECTORY=str(root / "log"))
    os.makedirs(env["CUDA_MPS_PIPE_DIRECTORY"])
    os.makedirs(env["CUDA_MPS_LOG_DIRECTORY"])
    subprocess.run([control, "-d"], env=env, check=True, timeout=30)
    try:
        yield env
    finally:
        subprocess.run([control], input="quit\n", text=True, env=env, timeout=30)
        time.sleep(1)
