"""accl.Communicator: one rank of an NCCL communicator, on host arrays."""

from __future__ import annotations

import operator
import time
from typing import Any, Sequence

import numpy as np

from . import _accl, _group
from ._dtypes import as_c_array, datatype_code, datatype_of, to_dtype
from ._enums import RedOp, Result, red_op
from ._errors import InvalidUsageError, make_error

UNIQUE_ID_BYTES: int = _accl.UNIQUE_ID_BYTES
SPLIT_NOCOLOR: int = _accl.SPLIT_NOCOLOR

# kind codes of _accl.coll
_ALLREDUCE, _BROADCAST, _REDUCE, _ALLGATHER, _REDUCESCATTER, _ALLTOALL, _GATHER, _SCATTER, \
    _SEND, _RECV = range(10)
_IN_PROGRESS = int(Result.IN_PROGRESS)  # a plain int: comparing with the IntEnum costs more
_CALL = ["ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter",
         "ncclAlltoAll", "ncclGather", "ncclScatter", "ncclSend", "ncclRecv"]


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


def _addr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _check_layout(what: str, send: np.ndarray | None, recv: np.ndarray | None,
                  offset: int | None) -> bool:
    """True when send and recv are NCCL's in-place layout: send starts `offset`
    bytes after recv (negative: before). Other overlaps are a ValueError."""
    if send is None or recv is None or send.nbytes == 0 or recv.nbytes == 0:
        return False
    # Bounds-only test in C first: the common case (separate buffers) needs no addresses.
    if not np.may_share_memory(send, recv):
        return False
    s, r = _addr(send), _addr(recv)
    if s >= r + recv.nbytes or r >= s + send.nbytes:
        return False
    if offset is not None and s - r == offset:
        return True
    raise ValueError(f"{what}: send and recv overlap, but not in NCCL's in-place layout "
                     "(see the method's documentation)")


def _flat(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1)


class PreMulSum:
    """A reduction operator made by Communicator.premul_sum: sum(scalar * x).

    Pass it as `op=`; it is valid only on the communicator that made it and
    for its dtype. destroy() (ncclRedOpDestroy; also at the end of a `with`
    block) frees it; using it afterwards is an accl.InvalidArgumentError.
    With a device scalar the 1-element array is read at every use and this
    handle keeps it alive until destroy().
    """

    def __init__(self, comm: Communicator, op: int, dtype: np.dtype, scalar: Any,
                 device_scalar: np.ndarray | None):
        self._comm = comm
        self._op = op
        self.dtype = dtype
        self._scalar = scalar
        self._device_scalar = device_scalar
        self._destroyed = False

    @property
    def op(self) -> int:
        """The ncclRedOp_t value."""
        return self._op

    @property
    def comm(self) -> Communicator:
        return self._comm

    @property
    def scalar(self) -> Any:
        """The scalar: its value (host-immediate) or the 1-element array (device)."""
        return self._device_scalar if self._device_scalar is not None else self._scalar

    @property
    def destroyed(self) -> bool:
        return self._destroyed

    def destroy(self) -> None:
        """ncclRedOpDestroy. A no-op once destroyed or when its communicator is closed."""
        if self._destroyed:
            return
        self._destroyed = True
        if not self._comm.closed:
            _accl.redop_destroy(self._comm._comm, self._op)

    def __int__(self) -> int:
        return self._op

    __index__ = __int__

    def __enter__(self) -> PreMulSum:
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()

    def __repr__(self) -> str:
        kind = "device" if self._device_scalar is not None else "host"
        state = " destroyed" if self._destroyed else ""
        return f"<accl.PreMulSum op={self._op} dtype={self.dtype} {kind} scalar={self.scalar!r}{state}>"


class Registration:
    """A buffer registered with ncclCommRegister; deregister() (or leaving a
    `with` block) calls ncclCommDeregister. Keeps the array alive until then."""

    def __init__(self, comm: Communicator, array: np.ndarray, handle: int):
        self._comm, self.array, self.handle = comm, array, handle
        self.registered = True

    def deregister(self) -> None:
        if not self.registered:
            return
        self.registered = False
        if not self._comm.closed:
            _accl.comm_deregister(self._comm._comm, self.handle)
        self.array = None

    def __enter__(self) -> Registration:
        return self

    def __exit__(self, *exc) -> None:
        self.deregister()


class Window:
    """This rank's part of a window made by Communicator.register_window
    (ncclCommWindowRegister, collective). Peers write into `array` with
    put_signal. deregister() (collective) or leaving a `with` block normally
    calls ncclCommWindowDeregister. A block that raises leaves it registered:
    deregistration is collective and the other ranks may never get there, so
    the window goes with the communicator (abort or destroy). The array stays
    alive until then."""

    def __init__(self, comm: Communicator, array: np.ndarray, handle: int):
        self._comm, self.array, self.handle = comm, array, handle
        self.registered = True

    def deregister(self) -> None:
        if not self.registered:
            return
        if not self._comm.closed:
            _accl.window_deregister(self._comm._comm, self.handle)  # raises: still registered
        self.registered = False
        self._comm._windows.discard(self)
        self.array = None

    def __enter__(self) -> Window:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.deregister()


def _premul_scalar(scalar: Any, dt: np.dtype) -> np.ndarray:
    """premul_sum's host scalar as a 1-element array of dt. For an integer
    dtype it must be an integer that dt holds: 0.5 would truncate to 0 (a
    premul_sum that zeroes everything) and 300 would wrap in int8."""
    if dt.kind in "iu":
        if isinstance(scalar, (bool, np.bool_)):
            raise TypeError(f"premul_sum scalar for {dt} must be an integer, not {scalar!r}")
        try:
            whole = operator.index(scalar)
        except TypeError:
            f = float(scalar)
            if not f.is_integer():
                raise ValueError(f"premul_sum scalar {scalar!r} is not an integer, which {dt} needs") from None
            whole = int(f)
        info = np.iinfo(dt)
        if not info.min <= whole <= info.max:
            raise ValueError(f"premul_sum scalar {scalar!r} is outside {dt}'s range [{info.min}, {info.max}]")
        return np.array(whole, dtype=dt).reshape(1)
    return np.array(scalar, dtype=dt).reshape(1)


class Communicator:
    """One rank of a communicator of `nranks` ranks that share `uid`.

    Every rank constructs its Communicator with the same nranks and uid and
    its own rank; construction returns once all ranks have joined. Used as a
    context manager it is destroyed on exit, or aborted if the block raises.

    uid: the 128-byte id, or a list of them (ncclCommInitRankScalable).
    config: optional dict of ncclConfig_t fields (blocking, cga_cluster_size,
    min_ctas, max_ctas, net_name, split_share); when given,
    ncclCommInitRankConfig is used. Calls on a non-blocking communicator
    (blocking=0) still return only once the operation is done here.

    Created inside accl.group(), the communicator is initialised when the
    group ends (so one thread can create several ranks); until then its
    properties and collectives are not available.
    """

    def __init__(self, nranks: int, uid: bytes | Sequence[bytes], rank: int, *,
                 config: dict | None = None):
        nranks = operator.index(nranks)
        rank = operator.index(rank)
        if config is not None:
            config = dict(config)
        if isinstance(uid, (list, tuple)):
            uids = [_as_uid(u) for u in uid]
            self._comm = _accl.comm_init_rank_scalable(nranks, rank, uids, config)
            call = "ncclCommInitRankScalable"
        else:
            self._comm = _accl.comm_init_rank(nranks, _as_uid(uid), rank, config)
            call = "ncclCommInitRank" if config is None else "ncclCommInitRankConfig"
        self._setup(call)

    @classmethod
    def _adopt(cls, handle: _accl.Comm, call: str) -> Communicator:
        self = cls.__new__(cls)
        self._comm = handle
        self._setup(call)
        return self

    def _setup(self, call: str) -> None:
        self._init_call = call
        self._windows: set = set()  # registered Windows (their arrays stay alive until deregistered)
        self._rank = self._size = self._device = None
        group = _group.current()
        if group is not None:  # queued: initialised at the group's end
            self._pending = True
            group._adopt(self)
            return
        self._pending = False
        self._finish_init()

    def _finish_init(self) -> None:
        try:
            self._wait(self._init_call)
            self._rank = self._comm.user_rank()
            self._size = self._comm.count()
            self._device = self._comm.cu_device()
            self._pending = False
        except BaseException:
            self._discard()
            raise

    def _discard(self) -> None:
        try:
            self._comm.abort()
        except Exception:  # keep the original error
            pass

    # -- properties ---------------------------------------------------------
    def _prop(self, value):
        if value is None:
            raise InvalidUsageError(Result.INVALID_USAGE,
                                    "this communicator was created inside a group and is "
                                    "ready once the group ends")
        return value

    @property
    def rank(self) -> int:
        """This rank (ncclCommUserRank)."""
        return self._prop(self._rank)

    @property
    def size(self) -> int:
        """Number of ranks (ncclCommCount)."""
        return self._prop(self._size)

    @property
    def device(self) -> int:
        """CUDA device of this rank (ncclCommCuDevice); -1 in host mode."""
        return self._prop(self._device)

    @property
    def closed(self) -> bool:
        """True once destroyed or aborted."""
        return not self._comm.alive

    # -- argument helpers ---------------------------------------------------
    @staticmethod
    def _input(send: Any, what: str = "send") -> np.ndarray:
        arr = np.asarray(send)
        if not arr.flags.c_contiguous:
            raise ValueError(f"{what} must be C-contiguous (use numpy.ascontiguousarray)")
        datatype_code(arr.dtype)  # TypeError for a dtype NCCL has not
        return arr

    @staticmethod
    def _output(recv: Any, dtype: np.dtype, size: int, what: str = "recv",
                of: str = "send") -> np.ndarray:
        if not isinstance(recv, np.ndarray):
            raise TypeError(f"{what} must be a numpy.ndarray, not {type(recv).__name__}")
        if recv.dtype != dtype:
            raise ValueError(f"{what} dtype {recv.dtype} differs from {of} dtype {dtype}")
        if recv.size != size:
            raise ValueError(f"{what} has {recv.size} elements, {size} needed")
        if not recv.flags.c_contiguous:
            raise ValueError(f"{what} must be C-contiguous")
        if not recv.flags.writeable:
            raise ValueError(f"{what} must be writeable")
        return recv

    def _op(self, op: Any) -> tuple[int, Any]:
        """(ncclRedOp_t value, object to keep alive while queued)."""
        if isinstance(op, PreMulSum):
            return op._op, op
        return int(red_op(op)), None

    def _root(self, root: Any) -> int:
        return operator.index(root)

    def _run(self, kind: int, send: np.ndarray | None, recv: np.ndarray | None, count: int,
             dtype: np.dtype, op: int = 0, root: int = 0, keep: Any = None) -> None:
        comm = self._live(_CALL[kind][4:])
        state = _accl.coll(kind, comm, as_c_array(send), as_c_array(recv), count,
                           datatype_code(dtype), op, root)
        self._done(kind, state, send, recv, keep)

    def _done(self, kind: int, state: int, send: Any, recv: Any, keep: Any = None) -> None:
        """After a call returned `state`: inside a group, keep its arrays alive
        until the group ends; a non-blocking communicator's call (IN_PROGRESS)
        is polled until it is done."""
        group = _group.current()
        if group is not None:
            group._hold(self, send, recv, keep)
        elif state == _IN_PROGRESS:
            self._wait(_CALL[kind])

    def _fast(self, kind: int, send: Any, recv: Any, op: Any = None, root: Any = 0) -> int:
        """The common call of a method, checked and run in C++ (_accl.coll_fast,
        python/src/coll_py.cpp): the call's state, or -1 where nothing was
        called and the method's own checks must run (they give its errors)."""
        if self._pending:
            return -1
        state = _accl.coll_fast(kind, self._comm, send, recv, op, root)
        if state > 0 or (state == 0 and _group.open_groups):
            self._done(kind, state, send, recv)
        return state

    def _split_rows(self, shape: tuple, size: int) -> tuple:
        """The shape of one rank's block of an array of `shape` split nranks ways."""
        n = self.size
        if len(shape) >= 1 and shape[0] == n:
            return tuple(shape[1:])
        return (size // n,)

    # -- collectives --------------------------------------------------------
    def allreduce(self, send: Any, recv: np.ndarray | None = None,
                  op: str | int | PreMulSum = "sum") -> np.ndarray:
        """ncclAllReduce of `send` into `recv`; returns recv.

        recv=None allocates a new array like send; `recv is send` reduces in
        place. send and recv must be C-contiguous with the same dtype and
        number of elements. op is "sum", "prod", "max", "min", "avg", a RedOp
        or a PreMulSum of this communicator.
        """
        if recv is None and type(send) is np.ndarray:
            # The new output, made here so the fast path can use it; the
            # general path takes it exactly as the one it would make.
            recv = np.empty_like(send, order="C")
        if not self._pending:
            # Fast path: the common call (NumPy arrays of a native dtype, a
            # built-in op) is checked and run in C++. It returns -1 without
            # calling anything for every other call, which the general path
            # below checks, runs or refuses with its documented errors.
            state = _accl.all_reduce_fast(self._comm, send, recv, op)
            if state == 0 and not _group.open_groups:
                return recv  # done, and no group to hold the arrays (the usual case)
            if state >= 0:
                self._done(_ALLREDUCE, state, send, recv)
                return recv
        self._live("allreduce")
        in_place = recv is send
        send_arr = self._input(send)
        opv, keep = self._op(op)
        if in_place:
            if not isinstance(send, np.ndarray):
                raise TypeError("in-place allreduce needs a numpy.ndarray (recv is send)")
            recv_arr = send_arr
            if not recv_arr.flags.writeable:
                raise ValueError("recv must be writeable")
        elif recv is None:
            recv_arr = np.empty_like(send_arr, order="C")
        else:
            recv_arr = self._output(recv, send_arr.dtype, send_arr.size)
            _check_layout("allreduce", send_arr, recv_arr, 0)
        self._run(_ALLREDUCE, send_arr, recv_arr, send_arr.size, send_arr.dtype, opv, keep=keep)
        return recv_arr

    def broadcast(self, send: Any, recv: np.ndarray | None = None, root: int = 0) -> np.ndarray:
        """ncclBroadcast: root's `send` into every rank's `recv`; returns recv.

        send is read only at the root; elsewhere it only gives the shape and
        dtype of a new recv (and may be None when recv is given). `recv is
        send` broadcasts in place (ncclBcast semantics).
        """
        if self._fast(_BROADCAST, send, recv, None, root) >= 0:
            return recv
        self._live("broadcast")
        root = self._root(root)
        if recv is send and send is not None:
            if not isinstance(send, np.ndarray):
                raise TypeError("in-place broadcast needs a numpy.ndarray (recv is send)")
            buf = self._output(send, send.dtype, send.size, what="buffer")
            self._run(_BROADCAST, buf, buf, buf.size, buf.dtype, root=root)
            return buf
        if send is None:
            if recv is None:
                raise TypeError("broadcast needs send (at least its shape and dtype) or recv")
            recv_arr = self._output(recv, recv.dtype, recv.size)
            send_arr = None
            if self.rank == root:
                raise ValueError("broadcast: send is None at the root")
        else:
            send_arr = self._input(send)
            if recv is None:
                recv_arr = np.empty_like(send_arr, order="C")
            else:
                recv_arr = self._output(recv, send_arr.dtype, send_arr.size)
                _check_layout("broadcast", send_arr, recv_arr, 0)
        self._run(_BROADCAST, send_arr, recv_arr, recv_arr.size, recv_arr.dtype, root=root)
        return recv_arr

    def bcast(self, buf: np.ndarray, root: int = 0) -> np.ndarray:
        """ncclBcast: in-place broadcast of `buf` from root; returns buf."""
        return self.broadcast(buf, buf, root)

    def reduce(self, send: Any, recv: np.ndarray | None = None,
               op: str | int | PreMulSum = "sum", root: int = 0) -> np.ndarray | None:
        """ncclReduce of every rank's `send` into root's `recv`.

        Returns recv at the root and None on the other ranks (NCCL writes only
        the root's recvbuff; a recv given there is left as it was). At the
        root recv=None allocates an array like send; `recv is send` reduces
        in place.
        """
        if self._fast(_REDUCE, send, recv, op, root) >= 0:
            return recv if self._rank == root else None
        self._live("reduce")
        root = self._root(root)
        send_arr = self._input(send)
        opv, keep = self._op(op)
        is_root = self.rank == root
        if recv is send:
            if not isinstance(send, np.ndarray):
                raise TypeError("in-place reduce needs a numpy.ndarray (recv is send)")
            recv_arr = self._output(send, send.dtype, send.size) if is_root else send_arr
        elif recv is None:
            recv_arr = np.empty_like(send_arr, order="C") if is_root else None
        else:
            recv_arr = self._output(recv, send_arr.dtype, send_arr.size)
            _check_layout("reduce", send_arr, recv_arr, 0)
        self._run(_REDUCE, send_arr, recv_arr, send_arr.size, send_arr.dtype, opv, root, keep)
        return recv_arr if is_root else None

    def allgather(self, send: Any, recv: np.ndarray | None = None) -> np.ndarray:
        """ncclAllGather: every rank's `send` (count elements), in rank order,
        into every rank's `recv` (nranks * count elements); returns recv.

        recv=None allocates shape (nranks,) + send.shape. In place (NCCL's
        layout): `send` is rank's block recv.reshape(-1)[rank*count:
        (rank+1)*count] -- or pass the whole buffer as both (`recv is send`),
        this rank's block holding its input.
        """
        if self._fast(_ALLGATHER, send, recv) >= 0:
            return recv
        self._live("allgather")
        n = self.size
        if recv is send:
            buf = self._output(send, np.asarray(send).dtype, np.asarray(send).size, what="buffer")
            if buf.size % n:
                raise ValueError(f"allgather in place: buffer size {buf.size} is not a multiple "
                                 f"of nranks = {n}")
            count = buf.size // n
            block = _flat(buf)[self.rank * count:(self.rank + 1) * count]
            self._run(_ALLGATHER, block, buf, count, buf.dtype)
            return buf
        send_arr = self._input(send)
        count = send_arr.size
        if recv is None:
            recv_arr = np.empty((n,) + send_arr.shape, dtype=send_arr.dtype)
        else:
            recv_arr = self._output(recv, send_arr.dtype, n * count)
            _check_layout("allgather", send_arr, recv_arr,
                          self.rank * count * send_arr.itemsize)
        self._run(_ALLGATHER, send_arr, recv_arr, count, send_arr.dtype)
        return recv_arr

    def reduce_scatter(self, send: Any, recv: np.ndarray | None = None,
                       op: str | int | PreMulSum = "sum") -> np.ndarray:
        """ncclReduceScatter: `send` (nranks * count elements) reduced over the
        ranks; rank r gets block r (count elements) in `recv`; returns recv.

        send.size must be a multiple of nranks. recv=None allocates
        send.shape[1:] when send.shape[0] == nranks, else (count,). In place
        (NCCL's layout): recv is send.reshape(-1)[rank*count:(rank+1)*count];
        `recv is send` does that and returns the block.
        """
        if self._fast(_REDUCESCATTER, send, recv, op) >= 0:
            return recv
        self._live("reduce_scatter")
        n = self.size
        send_arr = self._input(send)
        opv, keep = self._op(op)
        if send_arr.size % n:
            raise ValueError(f"reduce_scatter: send has {send_arr.size} elements, not a multiple "
                             f"of nranks = {n}")
        count = send_arr.size // n
        if recv is send:
            if not isinstance(send, np.ndarray):
                raise TypeError("in-place reduce_scatter needs a numpy.ndarray (recv is send)")
            self._output(send, send.dtype, send.size, what="buffer")
            recv_arr = _flat(send_arr)[self.rank * count:(self.rank + 1) * count]
            recv_arr = recv_arr.reshape(self._split_rows(send_arr.shape, send_arr.size))
        elif recv is None:
            recv_arr = np.empty(self._split_rows(send_arr.shape, send_arr.size), send_arr.dtype)
        else:
            recv_arr = self._output(recv, send_arr.dtype, count)
            _check_layout("reduce_scatter", send_arr, recv_arr,
                          -self.rank * count * send_arr.itemsize)
        self._run(_REDUCESCATTER, send_arr, recv_arr, count, send_arr.dtype, opv, keep=keep)
        return recv_arr

    def alltoall(self, send: Any, recv: np.ndarray | None = None) -> np.ndarray:
        """ncclAlltoAll: block p of `send` goes to rank p, and block r of `recv`
        comes from rank r (send.size / nranks elements each); returns recv.

        recv=None allocates an array like send; `recv is send` works in place.
        """
        if self._fast(_ALLTOALL, send, recv) >= 0:
            return recv
        self._live("alltoall")
        n = self.size
        in_place = recv is send
        send_arr = self._input(send)
        if send_arr.size % n:
            raise ValueError(f"alltoall: send has {send_arr.size} elements, not a multiple of "
                             f"nranks = {n}")
        if in_place:
            recv_arr = self._output(send, send_arr.dtype, send_arr.size, what="buffer")
        elif recv is None:
            recv_arr = np.empty_like(send_arr, order="C")
        else:
            recv_arr = self._output(recv, send_arr.dtype, send_arr.size)
            _check_layout("alltoall", send_arr, recv_arr, 0)
        self._run(_ALLTOALL, send_arr, recv_arr, send_arr.size // n, send_arr.dtype)
        return recv_arr

    def gather(self, send: Any, recv: np.ndarray | None = None, root: int = 0) -> np.ndarray | None:
        """ncclGather: every rank's `send` (count elements), in rank order, into
        root's `recv` (nranks * count elements).

        Returns recv at the root (recv=None allocates (nranks,) + send.shape)
        and None elsewhere. In place at the root (NCCL's layout): send is
        recv.reshape(-1)[root*count:(root+1)*count].
        """
        if self._fast(_GATHER, send, recv, None, root) >= 0:
            return recv if self._rank == root else None
        self._live("gather")
        n = self.size
        root = self._root(root)
        send_arr = self._input(send)
        is_root = self.rank == root
        count = send_arr.size
        recv_arr = None
        if is_root:
            if recv is None:
                recv_arr = np.empty((n,) + send_arr.shape, dtype=send_arr.dtype)
            else:
                recv_arr = self._output(recv, send_arr.dtype, n * count)
                _check_layout("gather", send_arr, recv_arr, root * count * send_arr.itemsize)
        self._run(_GATHER, send_arr, recv_arr, count, send_arr.dtype, root=root)
        return recv_arr

    def scatter(self, send: Any, recv: np.ndarray | None = None, root: int = 0) -> np.ndarray:
        """ncclScatter: block r of root's `send` (nranks * count elements) into
        rank r's `recv` (count elements); returns recv.

        send is read only at the root; elsewhere it only gives the shape and
        dtype (and may be None when recv is given). recv=None allocates
        send.shape[1:] when send.shape[0] == nranks, else (count,). In place
        at the root (NCCL's layout): recv is send.reshape(-1)[root*count:
        (root+1)*count].
        """
        if self._fast(_SCATTER, send, recv, None, root) >= 0:
            return recv
        self._live("scatter")
        n = self.size
        root = self._root(root)
        is_root = self.rank == root
        if send is None:
            if recv is None:
                raise TypeError("scatter needs send (at least its shape and dtype) or recv")
            if is_root:
                raise ValueError("scatter: send is None at the root")
            recv_arr = self._output(recv, recv.dtype, recv.size)
            self._run(_SCATTER, None, recv_arr, recv_arr.size, recv_arr.dtype, root=root)
            return recv_arr
        send_arr = self._input(send)
        if send_arr.size % n:
            raise ValueError(f"scatter: send has {send_arr.size} elements, not a multiple of "
                             f"nranks = {n}")
        count = send_arr.size // n
        if recv is None:
            recv_arr = np.empty(self._split_rows(send_arr.shape, send_arr.size), send_arr.dtype)
        else:
            recv_arr = self._output(recv, send_arr.dtype, count)
            _check_layout("scatter", send_arr, recv_arr, -root * count * send_arr.itemsize
                          if is_root else None)
        self._run(_SCATTER, send_arr if is_root else None, recv_arr, count, send_arr.dtype,
                  root=root)
        return recv_arr

    # -- point to point -----------------------------------------------------
    def send(self, array: Any, peer: int) -> None:
        """ncclSend of `array` to rank `peer` (which calls recv with as many
        elements of the same dtype). Outside a group it returns once the peer
        has the data; pairs of sends and receives that depend on each other
        (a ring shift, a send to self) belong in one accl.group()."""
        if self._fast(_SEND, array, None, None, peer) >= 0:
            return
        self._live("send")
        arr = self._input(array, "array")
        self._run(_SEND, arr, None, arr.size, arr.dtype, root=operator.index(peer))

    def recv(self, array_or_like: Any, peer: int) -> np.ndarray:
        """ncclRecv from rank `peer`; returns the array received into.

        array_or_like: a writeable C-contiguous numpy.ndarray to fill, or a
        (shape, dtype) pair to allocate one.
        """
        if self._fast(_RECV, None, array_or_like, None, peer) >= 0:
            return array_or_like
        self._live("recv")
        if isinstance(array_or_like, np.ndarray):
            out = self._output(array_or_like, array_or_like.dtype, array_or_like.size,
                               what="array", of="array")
            datatype_of(out.dtype)
        elif isinstance(array_or_like, tuple) and len(array_or_like) == 2:
            shape, dtype = array_or_like
            out = np.empty(shape, to_dtype(dtype))
            datatype_of(out.dtype)
        else:
            raise TypeError("recv needs a numpy.ndarray to fill or a (shape, dtype) pair, not "
                            f"{type(array_or_like).__name__}")
        self._run(_RECV, None, out, out.size, out.dtype, root=operator.index(peer))
        return out

    def sendrecv(self, send: Any, dest: int, recv: Any, source: int) -> np.ndarray:
        """ncclSend of `send` to rank `dest` and ncclRecv from rank `source`
        in one group, as MPI_Sendrecv: a ring shift or a pairwise exchange in
        one call. Returns the array received into; `recv` is what recv()
        takes (an array to fill, or a (shape, dtype) pair). Inside an open
        group both are queued there, like any call."""
        if not self._pending:  # the C++ check declines anything but two numpy.ndarrays
            state = _accl.sendrecv_fast(self._comm, send, dest, recv, source)
            if state >= 0:
                if state > 0 or _group.open_groups:
                    self._done(_SEND, state, send, recv)
                return recv
        if isinstance(send, np.ndarray) and isinstance(recv, np.ndarray):
            # The same buffer is nccl-tests' in-place sendrecv (the send may read
            # what already arrived, as with NCCL); a partial overlap is a mistake.
            if _addr(send) != _addr(recv) or send.nbytes != recv.nbytes:
                _check_layout("sendrecv", send, recv, None)
        with _group.group():
            self.send(send, dest)
            out = self.recv(recv, source)
        return out

    # -- groups, operators, communicators -----------------------------------
    @staticmethod
    def group(*, simulate: bool = False) -> _group.Group:
        """Same as accl.group() (a group spans every communicator of the thread)."""
        return _group.group(simulate=simulate)

    def premul_sum(self, scalar: Any = None, dtype: Any = None, *,
                   device_scalar: np.ndarray | None = None) -> PreMulSum:
        """ncclRedOpCreatePreMulSum: an op computing sum(scalar * x) for `dtype`.

        premul_sum(scalar, dtype): the scalar is read now (host-immediate).
        premul_sum(device_scalar=arr): arr is a 1-element array (of dtype, by
        default arr.dtype) read at every use (ncclScalarDevice; host memory in
        host mode); keep it alive -- the handle holds a reference until
        destroy().
        """
        comm = self._live("premul_sum")
        if device_scalar is not None:
            if scalar is not None:
                raise TypeError("premul_sum takes a scalar or device_scalar, not both")
            arr = device_scalar
            if not isinstance(arr, np.ndarray):
                raise TypeError("device_scalar must be a numpy.ndarray")
            dt = arr.dtype if dtype is None else to_dtype(dtype)
            if arr.dtype != dt:
                raise ValueError(f"device_scalar dtype {arr.dtype} differs from dtype {dt}")
            if arr.size != 1 or not arr.flags.c_contiguous:
                raise ValueError("device_scalar must be a contiguous 1-element array")
            op = _accl.redop_create_premul_sum(comm, as_c_array(arr), int(datatype_of(dt)), 0)
            return PreMulSum(self, op, dt, None, arr)
        if scalar is None or dtype is None:
            raise TypeError("premul_sum needs scalar and dtype (or device_scalar=array)")
        dt = to_dtype(dtype)
        value = _premul_scalar(scalar, dt)
        op = _accl.redop_create_premul_sum(comm, as_c_array(value), int(datatype_of(dt)), 1)
        return PreMulSum(self, op, dt, value[0], None)

    def split(self, color: int | None, key: int = 0, *,
              config: dict | None = None) -> Communicator | None:
        """ncclCommSplit (collective over this communicator): ranks with the
        same color form a new communicator, ordered by key (then by rank
        here). color None or SPLIT_NOCOLOR (-1): this rank joins none and gets
        None. config: ncclConfig_t fields (default: this communicator's)."""
        comm = self._live("split")
        color = SPLIT_NOCOLOR if color is None else operator.index(color)
        if config is not None:
            config = dict(config)
        handle = comm.split(color, operator.index(key), config)
        if handle is None:
            return None
        return Communicator._adopt(handle, "ncclCommSplit")

    def shrink(self, exclude: Sequence[int] = (), *, abort: bool = False,
               config: dict | None = None) -> Communicator:
        """ncclCommShrink (collective over the ranks that stay; the excluded
        ones do not call): a communicator without the ranks in `exclude`,
        the others in their order. abort=True (NCCL_SHRINK_ABORT) first stops
        this communicator's operations in flight, as after a failure.
        config: ncclConfig_t fields (default: this communicator's)."""
        comm = self._live("shrink")
        flags = _accl.SHRINK_ABORT if abort else 0
        handle = comm.shrink([operator.index(r) for r in exclude], None if config is None else dict(config), flags)
        return Communicator._adopt(handle, "ncclCommShrink")

    def revoke(self) -> None:
        """ncclCommRevoke (from any thread): operations in flight here and on
        the peers end with an error and new ones are refused; shrink, destroy
        and abort still work."""
        self._live("revoke").revoke()

    def grow(self, nranks: int, uid: bytes | None = None, *,
             config: dict | None = None) -> Communicator:
        """ncclCommGrow on an existing rank (collective over this communicator
        and the joining ranks, which call Communicator.join): a communicator
        of `nranks` where this rank keeps its rank. Rank 0 passes the id it
        made with get_unique_id() (and hands it to the joining ranks); the
        other existing ranks may pass None."""
        comm = self._live("grow")
        handle = _accl.comm_grow(comm, operator.index(nranks), None if uid is None else _as_uid(uid), -1,
                                 None if config is None else dict(config))
        return Communicator._adopt(handle, "ncclCommGrow")

    @classmethod
    def join(cls, nranks: int, uid: bytes, rank: int, *, config: dict | None = None) -> Communicator:
        """ncclCommGrow on a joining rank: rank `rank` of the grown
        communicator of `nranks`, with the id from the existing rank 0's
        get_unique_id()."""
        handle = _accl.comm_grow(None, operator.index(nranks), _as_uid(uid), operator.index(rank),
                                 None if config is None else dict(config))
        return cls._adopt(handle, "ncclCommGrow")

    def suspend(self, free_memory: bool = False) -> None:
        """ncclCommSuspend: finishes the queued work, then refuses operations
        until resume(). free_memory sets NCCL_SUSPEND_MEM (ACCL frees none:
        see mem_stats())."""
        self._live("suspend").suspend(_accl.SUSPEND_MEM if free_memory else 0)

    def resume(self) -> None:
        """ncclCommResume."""
        self._live("resume").resume()

    def mem_stats(self) -> dict[str, int]:
        """ncclCommMemStats: {"suspend_bytes": device memory suspend frees,
        "suspended": 1 while suspended, "persist_bytes": device memory kept
        while suspended, "total_bytes": all the communicator's device memory}."""
        comm = self._live("mem_stats")
        names = ("suspend_bytes", "suspended", "persist_bytes", "total_bytes")  # ncclCommMemStat_t order
        return {name: comm.mem_stats(i) for i, name in enumerate(names)}

    def get_unique_id(self) -> bytes:
        """ncclCommGetUniqueId: a new 128-byte unique id."""
        return self._live("get_unique_id").get_unique_id()

    def register(self, array: np.ndarray) -> Registration:
        """ncclCommRegister of a host array's memory (deregister() to undo)."""
        comm = self._live("register")
        if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
            raise ValueError("register needs a C-contiguous numpy.ndarray")
        return Registration(self, array, _accl.comm_register(comm, as_c_array(array)))

    # -- windows and one-sided operations (host arrays) ----------------------
    def register_window(self, array: np.ndarray, symmetric: bool = True) -> Window:
        """ncclCommWindowRegister of a writeable C-contiguous host array
        (collective: every rank registers its own, in the same order)."""
        comm = self._live("register_window")
        if not isinstance(array, np.ndarray) or not array.flags.c_contiguous or not array.flags.writeable:
            raise ValueError("register_window needs a writeable C-contiguous numpy.ndarray")
        flags = 1 if symmetric else 0  # NCCL_WIN_COLL_SYMMETRIC
        win = Window(self, array, _accl.window_register(comm, as_c_array(array), flags))
        # Peers may write into the array until it is deregistered, even when the
        # caller drops the Window: the communicator holds it until then.
        self._windows.add(win)
        return win

    def put_signal(self, array: Any, peer: int, window: Window, offset: int = 0) -> None:
        """ncclPutSignal: writes `array` into rank `peer`'s part of `window`,
        `offset` bytes in, then raises one signal there (wait_signal on the
        peer sees the data once it sees the signal). Returns once the data is
        on its way; the peer does not call anything."""
        comm = self._live("put_signal")
        if not isinstance(window, Window) or window._comm is not self or not window.registered:
            raise ValueError("put_signal needs a registered Window of this communicator")
        arr = self._input(array, "array")
        _accl.put_signal(comm, as_c_array(arr), arr.size, datatype_code(arr.dtype), operator.index(peer),
                         window.handle, operator.index(offset))

    def signal(self, peer: int) -> None:
        """ncclSignal: one signal to rank `peer`, after the puts sent to it before."""
        _accl.signal(self._live("signal"), operator.index(peer))

    def wait_signal(self, counts: Any) -> None:
        """ncclWaitSignal: blocks until each peer has raised as many more
        signals as asked, and consumes them. counts: {peer: n} or (peer, n) pairs."""
        comm = self._live("wait_signal")
        pairs = counts.items() if hasattr(counts, "items") else counts
        _accl.wait_signal(comm, [(operator.index(p), operator.index(n)) for p, n in pairs])

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
        self._windows.clear()  # the library has let go of them

    def abort(self) -> None:
        """ncclCommAbort: stop outstanding work and release resources. No-op once closed."""
        self._comm.abort()
        self._windows.clear()

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
        if self._pending:
            return "<accl.Communicator pending (created in a group)>"
        state = "closed" if self.closed else f"device={self._device}"
        return f"<accl.Communicator rank={self._rank} size={self._size} {state}>"

    # -- helpers ------------------------------------------------------------
    def _live(self, what: str) -> _accl.Comm:
        if not self._comm.alive:
            raise InvalidUsageError(Result.INVALID_USAGE,
                                    f"{what}: the communicator was already destroyed or aborted")
        if self._pending:
            raise InvalidUsageError(Result.INVALID_USAGE,
                                    f"{what}: the communicator was created inside a group and "
                                    "is ready once the group ends")
        return self._comm

    def _wait(self, call: str) -> None:
        """Poll a non-blocking communicator until its pending call is done."""
        delay = 0.0
        while True:
            state = self._comm.async_error()
            if state == Result.SUCCESS:
                return
            if state != Result.IN_PROGRESS:
                raise make_error(state, call, _accl.get_error_string(state), _accl.get_last_error())
            time.sleep(delay)
            delay = min(delay * 2 or 1e-5, 1e-3)


def mem_alloc(shape: Any, dtype: Any = np.uint8) -> np.ndarray:
    """An array in memory from ncclMemAlloc (freed with ncclMemFree when the
    array goes). Host mode only: it is host memory there."""
    dt = to_dtype(dtype)
    datatype_of(dt)
    shape = (operator.index(shape),) if np.ndim(shape) == 0 else tuple(map(operator.index, shape))
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    raw = _accl.mem_alloc(nbytes)
    return raw.view(dt).reshape(shape)


__all__ = ["Communicator", "PreMulSum", "RedOp", "Registration", "SPLIT_NOCOLOR",
           "UNIQUE_ID_BYTES", "get_unique_id", "mem_alloc"]
