"""NumPy dtypes <-> ncclDataType_t.

bfloat16 and the float8 types have no NumPy dtype of their own; arrays of the
ml_dtypes package's bfloat16 / float8_e4m3fn / float8_e5m2 are recognised by
name and handed to C as raw integers of the same width.
"""

from __future__ import annotations

import numpy as np

from ._enums import DataType

_NATIVE: dict[np.dtype, DataType] = {
    np.dtype(np.int8): DataType.INT8,
    np.dtype(np.uint8): DataType.UINT8,
    np.dtype(np.int32): DataType.INT32,
    np.dtype(np.uint32): DataType.UINT32,
    np.dtype(np.int64): DataType.INT64,
    np.dtype(np.uint64): DataType.UINT64,
    np.dtype(np.float16): DataType.FLOAT16,
    np.dtype(np.float32): DataType.FLOAT32,
    np.dtype(np.float64): DataType.FLOAT64,
}

# ml_dtypes names -> (DataType, same-width integer used to pass the bytes)
_BY_NAME: dict[str, tuple[DataType, type]] = {
    "bfloat16": (DataType.BFLOAT16, np.uint16),
    "float8_e4m3fn": (DataType.FLOAT8E4M3, np.uint8),
    "float8_e5m2": (DataType.FLOAT8E5M2, np.uint8),
}


def datatype_of(dtype: np.dtype) -> DataType:
    """The ncclDataType_t for a NumPy dtype; TypeError if NCCL has none."""
    dtype = np.dtype(dtype)
    if not dtype.isnative:
        raise TypeError(f"dtype {dtype} is not in native byte order")
    dt = _NATIVE.get(dtype)
    if dt is not None:
        return dt
    if dtype.name in _BY_NAME:
        return _BY_NAME[dtype.name][0]
    supported = ", ".join(sorted([str(d) for d in _NATIVE] + list(_BY_NAME)))
    raise TypeError(f"dtype {dtype} has no NCCL datatype (supported: {supported})")


def as_c_array(arr: np.ndarray) -> np.ndarray:
    """arr, or a same-width integer view of it when NumPy cannot export its dtype."""
    entry = _BY_NAME.get(arr.dtype.name)
    return arr.view(entry[1]) if entry is not None else arr
