"""Where the packaged library and headers are.

They sit beside the compiled extension: accl/lib/ and accl/include/ in a
normal install. In an editable install the .py files stay in the source tree
while the extension, lib/ and include/ are installed, so the extension's
location is the one to follow.
"""

from __future__ import annotations

import importlib.util
import os


def _root() -> str:
    spec = importlib.util.find_spec("accl._accl")
    if spec is not None and spec.origin:
        return os.path.dirname(os.path.abspath(spec.origin))
    return os.path.dirname(os.path.abspath(__file__))


def library_path() -> str:
    """Path of the libnccl.so.2 shipped with this package (accl/lib/libnccl.so.2)."""
    return os.path.join(_root(), "lib", "libnccl.so.2")


def lib_dir() -> str:
    """Folder holding libnccl.so.2 and the libnccl.so linker script."""
    return os.path.join(_root(), "lib")


def include_dir() -> str:
    """Folder holding nccl.h and accl.h (accl/include/)."""
    return os.path.join(_root(), "include")


def build_info() -> dict:
    """How the installed library was built (accl/_build.json, written by CMake):
    source_dir, configured_at (seconds since the epoch), cuda, device_kernels,
    cuda_architectures, cuda_why. Empty where it is missing (a plain CMake build)."""
    import json

    try:
        with open(os.path.join(_root(), "_build.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}
