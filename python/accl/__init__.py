"""ACCL: an NCCL-compatible collective library, from Python.

    import accl, numpy as np
    uid = accl.get_unique_id()                 # on rank 0, then share it
    with accl.Communicator(nranks, uid, rank) as comm:
        out = comm.allreduce(np.arange(4.0))   # host arrays in host mode
        parts = comm.allgather(np.arange(4.0)) # shape (nranks, 4)
        with accl.group():                     # queued, run together at the end
            comm.send(out, (comm.rank + 1) % comm.size)
            y = comm.recv(np.empty_like(out), (comm.rank - 1) % comm.size)

The extension (_accl) binds libnccl.so.2's C ABI; this package adds argument
checks, the NcclError hierarchy and the perf/info tools.
"""

from __future__ import annotations

from ._loader import _accl  # first: opens ACCL's own libnccl.so.2 by its path
from ._enums import DataType, RedOp, Result
from ._errors import (
    InProgressError,
    InternalError,
    InvalidArgumentError,
    InvalidUsageError,
    NcclError,
    NcclSystemError,
    NcclTimeoutError,
    RemoteError,
    UnhandledCudaError,
    make_error as _make_error,
)
from ._paths import include_dir, lib_dir, library_path
from ._dtypes import numpy_dtype
from . import tuner
from ._group import Group, group, simulate
from ._params import dump_params, params
from .communicator import (
    SPLIT_NOCOLOR,
    UNIQUE_ID_BYTES,
    Communicator,
    PreMulSum,
    Registration,
    Window,
    get_unique_id,
    mem_alloc,
)

_accl._set_error_factory(_make_error)

__version__: str = _accl.version_string()


def __getattr__(name: str):
    # bfloat16, float8_e4m3fn, float8_e5m2 come from ml_dtypes, imported on first use.
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        from . import _dtypes

        return getattr(_dtypes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def nccl_version() -> int:
    """ncclGetVersion(): the NCCL API level code, e.g. 23007 for 2.30.7."""
    return _accl.get_version()


def query_mode() -> tuple[bool, str]:
    """acclQueryMode(): (True if a new communicator would use a GPU, reason)."""
    return _accl.query_mode()


__all__ = [
    "Communicator",
    "DataType",
    "Group",
    "PreMulSum",
    "Registration",
    "SPLIT_NOCOLOR",
    "Window",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "group",
    "mem_alloc",
    "numpy_dtype",
    "params",
    "simulate",
    "tuner",
    "InProgressError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidUsageError",
    "NcclError",
    "NcclSystemError",
    "NcclTimeoutError",
    "RedOp",
    "RemoteError",
    "Result",
    "UNIQUE_ID_BYTES",
    "UnhandledCudaError",
    "__version__",
    "dump_params",
    "get_unique_id",
    "include_dir",
    "lib_dir",
    "library_path",
    "nccl_version",
    "query_mode",
]
