"""GPU suites: they run where ACCL was built with the CUDA executor
(ACCL_DEVICE_KERNELS=ON) and a GPU is visible, and skip cleanly elsewhere."""
import os
import shutil
import subprocess
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
