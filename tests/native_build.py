"""The native programs the tests run that link more than the installed
library: the C++ unit tests (they reach internals) and the perf drivers.
Where the installed accl was built from this checkout and is up to date
(ci/installed.py), they are built in that build's folder from the objects it
holds; else in a host-only CMake build of their own (build/native).
`python tests/native_build.py` builds them with the progress shown (ci/test.sh
does, before the suites); the fixtures build them quietly, a no-op once done."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "native"
TARGETS = ("accl_unit_tests", "accl_perf_drivers")
sys.path.insert(0, str(ROOT / "ci"))
import installed  # noqa: E402  (ci/installed.py)


def _run(cmd: list[str], quiet: bool, timeout: int) -> None:
    subprocess.run(cmd, check=True, timeout=timeout, stdout=subprocess.DEVNULL if quiet else None)


def build(quiet: bool = True) -> Path:
    """Builds TARGETS; returns the folder holding tests/cpp/ and perf/. Raises
    RuntimeError without cmake, subprocess.CalledProcessError if it fails."""
    if not shutil.which("cmake"):
        raise RuntimeError("cmake is required for the unit tests and the perf drivers")
    jobs = str(os.cpu_count() or 2)
    info, why = installed.reusable()
    if info and Path(info.get("build_dir", "")).is_dir():
        try:  # pip's build folder: its tools may be gone (an isolated build's); then build apart
            _run(["cmake", "--build", info["build_dir"], "-j", jobs, "--target", *TARGETS], quiet, 1200)
            return Path(info["build_dir"])
        except subprocess.CalledProcessError:
            if not quiet:
                print(f"the installed build's folder ({info['build_dir']}) cannot build them: building apart")
    elif not quiet:
        print(f"building apart, in {BUILD}: {why}")
    _run(["cmake", "-S", str(ROOT), "-B", str(BUILD), "-DACCL_CUDA=OFF", "-DCMAKE_BUILD_TYPE=Release"], quiet, 600)
    _run(["cmake", "--build", str(BUILD), "-j", jobs, "--target", *TARGETS], quiet, 1200)
    return BUILD


if __name__ == "__main__":
    try:
        print(f"built in {build(quiet=False)}")
    except (RuntimeError, subprocess.CalledProcessError) as e:
        sys.exit(f"native build failed: {e}")
