"""python -m accl.info: what this ACCL is and how to use its library.

Prints the ACCL version, the NCCL API level, the mode a communicator would
run in, where libnccl.so.2 and the headers are, and how to use them.
"""

from __future__ import annotations

import os
import sys

import accl
from accl import _accl, _paths


def format_version_code(code: int) -> str:
    """NCCL's version code as major.minor.patch (23007 -> "2.30.7")."""
    if code >= 10000:  # NCCL >= 2.9: major*10000 + minor*100 + patch
        major, rest = divmod(code, 10000)
    else:  # older: major*1000 + minor*100 + patch
        major, rest = divmod(code, 1000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def _built() -> str:
    info = _paths.build_info()
    if not info:
        return "unknown (no accl/_build.json)"
    if info.get("device_kernels") == "ON":
        return f"with the CUDA executor, for sm {info.get('cuda_architectures')}"
    if info.get("cuda") == "ON":
        return "with CUDA, without the device kernels (ACCL_DEVICE_KERNELS=OFF): host buffers only"
    return f"host only ({info.get('cuda_why', '')})"


def report() -> list[tuple[str, str]]:
    """The (label, value) lines that main() prints."""
    code = accl.nccl_version()
    _, reason = accl.query_mode()
    lib = accl.library_path()
    inc = accl.include_dir()
    libdir = os.path.dirname(lib)
    rows = [
        ("ACCL version", accl.__version__),
        ("NCCL API level", f"{format_version_code(code)} ({code})"),
        ("mode", reason),
        ("built", _built()),
        ("library", lib),
    ]
    loaded = _accl.loaded_library_path()
    if loaded and os.path.realpath(loaded) != os.path.realpath(lib):
        rows.append(("loaded from", loaded))
    rows += [
        ("headers", inc),
        ("run a program", f"LD_PRELOAD={lib} <program>"),
        ("build against", f"cc -I{inc} -L{libdir} -Wl,-rpath,{libdir} -lnccl"),
    ]
    return rows


def main(argv: list[str] | None = None) -> int:
    rows = report()
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}} : {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
