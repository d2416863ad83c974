"""The native programs the tests run that link more than the installed
library: the C++ unit tests (they reach internals) and the perf drivers. One
host-only CMake build serves both. `python tests/native_build.py` builds it
with its progress shown (ci/test.sh does, before the suites); the fixtures
build it quietly, which is a no-op once it is up to date."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "native"
TARGETS = ("accl_unit_tests", "nccl", "accl_perf_drivers")


def build(quiet: bool = True) -> Path:
    """Builds TARGETS in BUILD; returns BUILD. Raises RuntimeError without cmake,
    subprocess.CalledProcessError if the build fails."""
    if not shutil.which("cmake"):
        raise RuntimeError("cmake is required for the unit tests and the perf drivers")
    out = subprocess.DEVNULL if quiet else None
    jobs = str(os.cpu_count() or 2)
    subprocess.run(["cmake", "-S", str(ROOT), "-B", str(BUILD), "-DACCL_CUDA=OFF", "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, timeout=600, stdout=out)
    subprocess.run(["cmake", "--build", str(BUILD), "-j", jobs, "--target", *TARGETS], check=True, timeout=1200,
                   stdout=out)
    return BUILD


if __name__ == "__main__":
    try:
        build(quiet=False)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        sys.exit(f"native build failed: {e}")
