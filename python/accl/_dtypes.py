"""NumPy dtypes <-> ncclDataType_t.

bfloat16 and the float8 types have no NumPy dtype of their own; they come
from the ml_dtypes package (a dependency of accl): bfloat16, float8_e4m3fn
(NCCL's ncclFloat8e4m3) and float8_e5m2. Arrays of them are handed to C as raw
integers of the same width. They are also recognised by dtype name, so an
ml_dtypes that is not importable here still maps correctly.

ml_dtypes is imported on first use, not with accl: its import takes over a
second on a small machine, which every `accl-run` and `import accl` would pay.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._enums import DataType

import functools

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

# Other spellings accepted where a dtype is named by a string.
_ALIASES: dict[str, str] = {
    "bf16": "bfloat16", "float8e4m3": "float8_e4m3fn", "float8_e4m3": "float8_e4m3fn",
    "fp8_e4m3": "float8_e4m3fn", "e4m3": "float8_e4m3fn", "float8e5m2": "float8_e5m2",
    "fp8_e5m2": "float8_e5m2", "e5m2": "float8_e5m2", "half": "float16", "float": "float32",
    "double": "float64",
}

_LOWP_NAMES = {"bfloat16": DataType.BFLOAT16, "float8_e4m3fn": DataType.FLOAT8E4M3,
               "float8_e5m2": DataType.FLOAT8E5M2}


@functools.lru_cache(maxsize=None)
def _ml() -> Any:
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes is a dependency
        return None
    return ml_dtypes


@functools.lru_cache(maxsize=None)
def _lowp() -> dict[DataType, np.dtype]:
    ml = _ml()
    return {} if ml is None else {dt: np.dtype(getattr(ml, name)) for name, dt in _LOWP_NAMES.items()}


def __getattr__(name: str) -> Any:
    # bfloat16, float8_e4m3fn, float8_e5m2: the ml_dtypes dtypes, made on first access
    if name in _LOWP_NAMES:
        return _lowp().get(_LOWP_NAMES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def to_dtype(dtype: Any) -> np.dtype:
    """A NumPy dtype from a dtype, a type, a name ("bfloat16", "float8_e4m3fn",
    "e5m2", ...) or an accl.DataType."""
    if isinstance(dtype, DataType):
        return numpy_dtype(dtype)
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype.lower(), dtype.lower())
        if name in _BY_NAME:
            if _ml() is None:
                raise TypeError(f"dtype {dtype!r} needs the ml_dtypes package")
            return _lowp()[_BY_NAME[name][0]]
        return np.dtype(name)
    return np.dtype(dtype)


def numpy_dtype(datatype: DataType | int) -> np.dtype:
    """The NumPy (or ml_dtypes) dtype of an ncclDataType_t."""
    datatype = DataType(datatype)
    for dt, d in _NATIVE.items():
        if d == datatype:
            return dt
    if datatype in _lowp():
        return _lowp()[datatype]
    raise TypeError(f"{datatype!r} needs the ml_dtypes package")  # pragma: no cover


_LOWP_SEEN: dict[np.dtype, DataType] = {}  # ml_dtypes dtypes already mapped


def datatype_of(dtype: np.dtype) -> DataType:
    """The ncclDataType_t for a NumPy dtype; TypeError if NCCL has none."""
    dtype = np.dtype(dtype)
    if not dtype.isnative:
        raise TypeError(f"dtype {dtype} is not in native byte order")
    dt = _NATIVE.get(dtype)
    if dt is not None:
        return dt
    dt = _LOWP_SEEN.get(dtype)
    if dt is not None:
        return dt
    if dtype.name in _BY_NAME and dtype.itemsize == np.dtype(_BY_NAME[dtype.name][1]).itemsize:
        dt = _LOWP_SEEN[dtype] = _BY_NAME[dtype.name][0]  # dtype.name is slow: remember the answer
        return dt
    supported = ", ".join(sorted([str(d) for d in _NATIVE] + list(_BY_NAME)))
    raise TypeError(f"dtype {dtype} has no NCCL datatype (supported: {supported})")


# dtype -> its ncclDataType_t as a plain int, for dtypes datatype_of() accepted.
# Every collective asks; a dict hit costs far less than datatype_of() and the
# IntEnum-to-int conversion (no failures are stored: they raise each time).
_CODES: dict[np.dtype, int] = {}


def datatype_code(dtype: np.dtype) -> int:
    """int(datatype_of(dtype)), remembered per dtype."""
    code = _CODES.get(dtype)
    if code is None:
        code = _CODES[dtype] = int(datatype_of(dtype))
    return code


# dtype -> the integer type its buffer is exported as (None: exported as is).
# Keyed by the dtype object: dtype.name builds a string on every call, which
# cost microseconds per collective on the hot path.
_VIEW_AS: dict[np.dtype, type | None] = {}


def as_c_array(arr: np.ndarray | None) -> np.ndarray | None:
    """arr, or a same-width integer view of it when NumPy cannot export its dtype."""
    if arr is None:
        return None
    dt = arr.dtype
    try:
        view = _VIEW_AS[dt]
    except KeyError:
        entry = _BY_NAME.get(dt.name)
        view = _VIEW_AS[dt] = entry[1] if entry is not None else None
    return arr.view(view) if view is not None else arr
