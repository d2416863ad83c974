"""NCCL's C enums as Python IntEnums (values as in nccl.h, NCCL 2.30)."""

from __future__ import annotations

import enum
import operator


class Result(enum.IntEnum):
    """ncclResult_t."""

    SUCCESS = 0
    UNHANDLED_CUDA_ERROR = 1
    SYSTEM_ERROR = 2
    INTERNAL_ERROR = 3
    INVALID_ARGUMENT = 4
    INVALID_USAGE = 5
    REMOTE_ERROR = 6
    IN_PROGRESS = 7
    TIMEOUT = 8


class DataType(enum.IntEnum):
    """ncclDataType_t. CHAR, INT, HALF, FLOAT and DOUBLE are NCCL's aliases."""

    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT8E4M3 = 10
    FLOAT8E5M2 = 11
    CHAR = 0
    INT = 2
    HALF = 6
    FLOAT = 7
    DOUBLE = 8


class RedOp(enum.IntEnum):
    """ncclRedOp_t (the built-in operations)."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


# The lower-case names, as callers nearly always spell them: one dict lookup
# instead of upper() and an Enum lookup on every collective.
_BY_LOWER_NAME = {m.name.lower(): m for m in RedOp}


def red_op(op: str | int) -> RedOp:
    """RedOp from a name ("sum", "prod", "max", "min", "avg"; any case) or a value."""
    if type(op) is str:
        found = _BY_LOWER_NAME.get(op)
        if found is not None:
            return found
    if isinstance(op, str):
        try:
            return RedOp[op.upper()]
        except KeyError:
            names = ", ".join(repr(o.name.lower()) for o in RedOp)
            raise ValueError(f"unknown reduction op {op!r} (expected one of {names})") from None
    if isinstance(op, bool) or not isinstance(op, (int, RedOp)) and not hasattr(op, "__index__"):
        # True would be PROD and 1.0 too: a flag or a float is not an op
        raise TypeError(f"reduction op must be a name, a RedOp or an int, not {type(op).__name__} {op!r}")
    try:
        return RedOp(operator.index(op))
    except ValueError:
        raise ValueError(f"unknown reduction op {op!r}") from None
