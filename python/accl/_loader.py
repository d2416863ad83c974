"""Loading the extension.

_accl does not link libnccl.so.2: at import it opens the packaged
accl/lib/libnccl.so.2 by its path (python/src/api.cpp), so a libnccl.so.2 that
is already in the process (NVIDIA's, brought in by `import torch`) can neither
stand in for ACCL's nor stop it from loading; the two then live side by side,
torch's "nccl" backend on NVIDIA's and accl on ACCL's. Under
`LD_PRELOAD=<accl/lib/libnccl.so.2>` (accl-run) both are ACCL's one copy.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def load_extension() -> ModuleType:
    """Import accl._accl (an ImportError says which library could not be used)."""
    return importlib.import_module("accl._accl")


_accl = load_extension()
