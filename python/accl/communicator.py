"""accl.Communicator: one rank of an NCCL communicator, on host arrays."""

from __future__ import annotations

import operator
import time
from typing import Any

import numpy as np

from . import _accl
from ._dtypes import as_c_array, datatype_of
from ._enums import RedOp, Result, red_op
from ._errors import InvalidUsageError, error_class

UNIQUE_ID_BYTES: int = _accl.UNIQUE_ID_BYTES


def get_unique_id() -> bytes:
    """ncclGetUniqueId: the 128-byte id rank 0 creates and hands to every rank."""
    return _accl.get_unique_id()


def _as_uid(uid: Any) -> bytes:
    if isinstance(uid, str):
        raise TypeError("uid must be bytes (use bytes.fromhex() for a hex string)")
    try:
        data = bytes(memoryview(uid))
    except TypeError:
        raise TypeError(f"uid must be bytes, not {type(uid).__name__}") from None
    if len(data) != UNIQUE_ID_BYTES:
        raise ValueError(f"uid must be {UNIQUE_ID_BYTES} bytes, got {len(data)}")
    return data


class Communicator:
    """One rank of a communicator of `nranks` ranks that share `uid`.

    Every rank constructs its Communicator with the same nranks and uid and
    its own rank; construction returns once all ranks have joined. Used as a
    context manager it is destroyed on exit, or aborted if the block raises.

    config: optional dict of ncclConfig_t fields (blocking, cga_cluster_size,
    min_ctas, max_ctas, net_name, split_share); when given,
    ncclCommInitRankConfig is used. Calls on a non-blocking communicator
    (blocking=0) still return only once the operation is done here.
    """

    def __init__(self, nranks: int, uid: bytes, rank: int, *, config: dict | None = None):
        nranks = operator.index(nranks)
        rank = operator.index(rank)
        uid = _as_uid(uid)
        if config is not None:
            config = dict(config)
        self._comm = _accl.comm_init_rank(nranks, uid, rank, config)
        try:
            self._wait("ncclCommInitRank" if config is None else "ncclCommInitRankConfig")
            self._rank = self._comm.user_rank()
            self._size = self._comm.count()
            self._device = self._comm.cu_device()
        except BaseException:
            try:
                self._comm.abort()
            except Exception:  # keep the original error
                pass
            raise

    # -- properties ---------------------------------------------------------
    @property
    def rank(self) -> int:
        """This rank (ncclCommUserRank)."""
        return self._rank

    @property
    def size(self) -> int:
        """Number of ranks (ncclCommCount)."""
        return self._size

    @property
    def device(self) -> int:
        """CUDA device of this rank (ncclCommCuDevice); -1 in host mode."""
        return self._device

    @property
    def closed(self) -> bool:
        """True once destroyed or aborted."""
        return not self._comm.alive

    # -- collectives --------------------------------------------------------
    def allreduce(self, send: Any, recv: np.ndarray | None = None,
                  op: str | int = "sum") -> np.ndarray:
        """ncclAllReduce of `send` into `recv`; returns recv.

        recv=None allocates a new array like send; `recv is send` reduces in
        place. send and recv must be C-contiguous with the same dtype and
        number of elements. op is "sum", "prod", "max", "min", "avg" or a RedOp.
        """
        self._live("allreduce")
        in_place = recv is send
        send_arr = np.asarray(send)
        if not send_arr.flags.c_contiguous:
            raise ValueError("send must be C-contiguous (use numpy.ascontiguousarray)")
        datatype = datatype_of(send_arr.dtype)
        reduction = red_op(op)
        if in_place:
            if not isinstance(send, np.ndarray):
                raise TypeError("in-place allreduce needs a numpy.ndarray (recv is send)")
            recv_arr = send_arr
        elif recv is None:
            recv_arr = np.empty_like(send_arr, order="C")
        else:
            recv_arr = self._check_recv(send_arr, recv)
        if not recv_arr.flags.writeable:
            raise ValueError("recv must be writeable")
        state = _accl.all_reduce(self._comm, as_c_array(send_arr), as_c_array(recv_arr),
                                 send_arr.size, int(datatype), int(reduction))
        if state == Result.IN_PROGRESS:
            self._wait("ncclAllReduce")
        return recv_arr

    @staticmethod
    def _check_recv(send: np.ndarray, recv: Any) -> np.ndarray:
        if not isinstance(recv, np.ndarray):
            raise TypeError(f"recv must be a numpy.ndarray, not {type(recv).__name__}")
        if recv.dtype != send.dtype:
            raise ValueError(f"recv dtype {recv.dtype} differs from send dtype {send.dtype}")
        if recv.size != send.size:
            raise ValueError(f"recv has {recv.size} elements, send has {send.size}")
        if not recv.flags.c_contiguous:
            raise ValueError("recv must be C-contiguous")
        return recv

    # -- lifetime -----------------------------------------------------------
    def async_error(self) -> Result:
        """ncclCommGetAsyncError: SUCCESS, IN_PROGRESS, or the error the communicator hit."""
        return Result(self._live("async_error").async_error())

    def finalize(self) -> None:
        """ncclCommFinalize: flush outstanding work (collective: every rank calls it)."""
        if self._live("finalize").finalize() == Result.IN_PROGRESS:
            self._wait("ncclCommFinalize")

    def destroy(self) -> None:
        """ncclCommDestroy: release this rank's resources. No-op once closed."""
        self._comm.destroy()

    def abort(self) -> None:
        """ncclCommAbort: stop outstanding work and release resources. No-op once closed."""
        self._comm.abort()

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.destroy()
            return
        try:
            self.abort()
        except Exception:  # never hide the error that got us here
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"device={self._device}"
        return f"<accl.Communicator rank={self._rank} size={self._size} {state}>"

    # -- helpers ------------------------------------------------------------
    def _live(self, what: str) -> _accl.Comm:
        if not self._comm.alive:
            raise InvalidUsageError(Result.INVALID_USAGE,
                                    f"{what}: the communicator was already destroyed or aborted")
        return self._comm

    def _wait(self, call: str) -> None:
        """Poll a non-blocking communicator until its pending call is done."""
        delay = 0.0
        while True:
            state = self._comm.async_error()
            if state == Result.SUCCESS:
                return
            if state != Result.IN_PROGRESS:
                last = _accl.get_last_error()
                message = f"{call} failed: {_accl.get_error_string(state)} (code {state})"
                if last:
                    message += f": {last}"
                raise error_class(state)(state, message, call=call, last_warning=last)
            time.sleep(delay)
            delay = min(delay * 2 or 1e-5, 1e-3)


__all__ = ["Communicator", "RedOp", "UNIQUE_ID_BYTES", "get_unique_id"]
