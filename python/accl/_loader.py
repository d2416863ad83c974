"""Loading the extension, and saying why when it cannot be loaded.

_accl links libnccl.so.2 by its SONAME. If another libnccl.so.2 (NVIDIA's,
e.g. brought in by `import torch`) is already in the process, the dynamic
loader reuses that one and ACCL's own symbols are missing.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from ._paths import library_path


def _loaded_libnccl() -> list[str]:
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if line.rstrip().endswith("/libnccl.so.2")}
    except OSError:
        return []
    return sorted(paths)


def load_extension() -> ModuleType:
    """Import accl._accl, explaining a clash with another libnccl.so.2."""
    try:
        return importlib.import_module("accl._accl")
    except ImportError as e:
        ours = os.path.realpath(library_path())
        others = [p for p in _loaded_libnccl() if os.path.realpath(p) != ours]
        if "undefined symbol" not in str(e) or not others:
            raise
        raise ImportError(
            f"accl cannot use its libnccl.so.2 ({ours}): another libnccl.so.2 is already "
            f"loaded in this process ({', '.join(others)}), typically by `import torch`. "
            f"Import accl first, or run with LD_PRELOAD={ours} so that every user of NCCL "
            f"in the process gets ACCL. ({e})") from e


_accl = load_extension()
