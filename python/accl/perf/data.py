"""Input patterns whose reductions are exact, and the expected results.

Every rank fills its input from (rank, index) with small integers, so sums,
products, maxima and minima are exact in every datatype (integer types wrap
the same way in NumPy as in C). Only avg on floating types is compared with a
tolerance, because a library may scale before or after summing. Collectives
that only move data (op "none") get values that differ between any two of
up to 31 ranks at every index, so a block from the wrong rank shows. `rank`
may be an array (one rank per element, for gathered results).
"""

from __future__ import annotations

import numpy as np

# Relative tolerance for avg on floating types, by itemsize.
_AVG_RTOL = {1: 0.13, 2: 1e-2, 4: 1e-5, 8: 1e-12}


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype for a NumPy or ml_dtypes name (bfloat16, float8_*)."""
    try:
        return np.dtype(name)
    except TypeError:
        pass
    try:
        import ml_dtypes
    except ImportError:
        raise SystemExit(f"accl.perf: datatype {name} needs the ml_dtypes package") from None
    return np.dtype(getattr(ml_dtypes, name))


def _pattern(rank: int, index: np.ndarray, op: str) -> np.ndarray:
    if op == "prod":  # factors in {1, 2}: products stay small powers of two
        return np.where((index + rank) % 3 == 0, 2, 1)
    if op == "none":  # never 0, so an element left unwritten (0) shows
        return (index * 7 + rank * 13) % 31 + 1
    if op in ("max", "min"):
        return (index * 7 + rank * 13) % 31
    return (index + 3 * rank) % 8 + 1  # sum, avg


def fill(rank: int, index: np.ndarray, dtype: np.dtype, op: str) -> np.ndarray:
    """This rank's input for the element indices `index`."""
    return _pattern(rank, index, op).astype(dtype)


def expected(nranks: int, index: np.ndarray, dtype: np.dtype, op: str) -> np.ndarray:
    """The reduction over all ranks' inputs, computed in `dtype`."""
    acc = fill(0, index, dtype, op)
    for rank in range(1, nranks):
        x = fill(rank, index, dtype, op)
        if op in ("sum", "avg"):
            acc = acc + x
        elif op == "prod":
            acc = acc * x
        elif op == "max":
            acc = np.maximum(acc, x)
        else:
            acc = np.minimum(acc, x)
    if op == "avg":
        if np.issubdtype(dtype, np.integer):
            acc = acc // nranks
        else:
            acc = (acc.astype(np.float64) / nranks).astype(dtype)
    return acc.astype(dtype, copy=False)


def count_wrong(result: np.ndarray, want: np.ndarray, op: str) -> int:
    """Elements of `result` that differ from `want`."""
    if op == "avg" and not np.issubdtype(want.dtype, np.integer):
        got, ref = result.astype(np.float64), want.astype(np.float64)
        rtol = _AVG_RTOL[want.dtype.itemsize]
        return int(np.count_nonzero(~np.isclose(got, ref, rtol=rtol, atol=0.0)))
    if want.dtype.kind not in "iuf":  # ml_dtypes (bfloat16, float8): compare values
        return int(np.count_nonzero(result.astype(np.float64) != want.astype(np.float64)))
    return int(np.count_nonzero(result != want))
