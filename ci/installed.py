"""Whether the accl that this Python imports was built from this checkout
with no source changed since, and as ACCL_CUDA asks (ON: with the CUDA parts;
OFF: without). Prints why or why not; exit status 0 when it can be reused.
ci/test.sh asks, so that it rebuilds only what `pip install .` did not, and
tests/native_build.py, which then builds the test programs in that build's
folder from the objects it holds."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What goes into the installed package (tests/ and perf/ are built apart).
SOURCES = ["src", "include", "python", "CMakeLists.txt", "pyproject.toml"]


def reusable() -> tuple[dict | None, str]:
    """(the installed build's accl/_build.json, why) where it can be reused, else (None, why not)."""
    try:
        from accl import _paths
    except ImportError as e:
        return None, f"accl is not installed for {sys.executable} ({e})"
    info = _paths.build_info()
    if not info:
        return None, "the installed accl says nothing of its build (no accl/_build.json)"
    if Path(info["source_dir"]).resolve() != ROOT:
        return None, f"the installed accl was built from {info['source_dir']}"
    want = os.environ.get("ACCL_CUDA", "AUTO").upper()
    if want in ("ON", "OFF") and info.get("cuda") != want:
        return None, f"ACCL_CUDA={want}, and the installed accl was built with CUDA {info.get('cuda')}"
    changed = subprocess.run(["find", *SOURCES, "-type", "f", "-not", "-path", "*/__pycache__/*", "-newermt",
                              f"@{info['configured_at']}", "-print", "-quit"],
                             cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if changed:
        return None, f"{changed} changed since the installed accl was built"
    kernels = "with the CUDA kernels" if info.get("device_kernels") == "ON" else "host only"
    return info, f"the installed accl was built from this checkout ({kernels}), and no source changed since"


if __name__ == "__main__":
    info, why = reusable()
    print(why)
    sys.exit(0 if info else 1)
