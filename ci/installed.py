"""Whether the accl that this Python imports was built from this checkout
with no source changed since, and as ACCL_CUDA asks (ON: with the CUDA parts;
OFF: without). Prints why or why not; exit status 0 when it can be reused.
ci/test.sh asks, so that it rebuilds only what `pip install .` did not."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What goes into the installed package (tests/ and perf/ are built apart).
SOURCES = ["src", "include", "python", "CMakeLists.txt", "pyproject.toml"]


def main() -> int:
    try:
        from accl import _paths
    except ImportError as e:
        print(f"accl is not installed for {sys.executable} ({e})")
        return 1
    info = _paths.build_info()
    if not info:
        print("the installed accl says nothing of its build (no accl/_build.json)")
        return 1
    if Path(info["source_dir"]).resolve() != ROOT:
        print(f"the installed accl was built from {info['source_dir']}")
        return 1
    want = os.environ.get("ACCL_CUDA", "AUTO").upper()
    if want in ("ON", "OFF") and info.get("cuda") != want:
        print(f"ACCL_CUDA={want}, and the installed accl was built with CUDA {info.get('cuda')}")
        return 1
    changed = subprocess.run(["find", *SOURCES, "-type", "f", "-not", "-path", "*/__pycache__/*", "-newermt",
                              f"@{info['configured_at']}", "-print", "-quit"],
                             cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if changed:
        print(f"{changed} changed since the installed accl was built")
        return 1
    kernels = "with the CUDA kernels" if info.get("device_kernels") == "ON" else "host only"
    print(f"the installed accl was built from this checkout ({kernels}), and no source changed since")
    return 0


if __name__ == "__main__":
    sys.exit(main())
