"""``torch.distributed`` backend ``"accl"``: CPU tensors through ACCL host mode.

    import torch.distributed as dist
    import accl.torch                      # registers the backend
    dist.init_process_group("accl", rank=rank, world_size=n)

Rank 0 of every process group makes an ``accl.get_unique_id()`` and publishes
it through the group's c10d store; every rank then builds an
``accl.Communicator``. Tensors must be CPU tensors; contiguous ones are passed
to ACCL without a copy (``tensor.numpy()``; bfloat16 / float8 through a
same-size integer view), others go through a contiguous temporary that is
copied back. Host mode is synchronous, so every call returns a completed
``Work``. See docs/torch.md for what is supported.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future
from torch.futures import Future

import accl
from accl import _dtypes

__all__ = ["ProcessGroupACCL", "BACKEND_NAME", "create_process_group"]

BACKEND_NAME = "accl"
_UID_KEY = "accl_torch_unique_id"

# torch dtype -> (same-size torch view dtype or None, numpy dtype)
_DTYPES: dict[torch.dtype, tuple[torch.dtype | None, Any]] = {
    torch.int8: (None, np.int8),
    torch.uint8: (None, np.uint8),
    torch.bool: (torch.uint8, np.uint8),  # as NCCL in torch: bool -> ncclUint8
    torch.int32: (None, np.int32),
    torch.int64: (None, np.int64),
    torch.float16: (None, np.float16),
    torch.float32: (None, np.float32),
    torch.float64: (None, np.float64),
    torch.bfloat16: (torch.int16, _dtypes.bfloat16),
}
for _name, _np in (("uint32", np.uint32), ("uint64", np.uint64)):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = (None, _np)
for _name, _np in (("float8_e4m3fn", _dtypes.float8_e4m3fn), ("float8_e5m2", _dtypes.float8_e5m2)):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = (torch.uint8, _np)

_OPS = {
    dist.ReduceOp.SUM: "sum",
    dist.ReduceOp.PRODUCT: "prod",
    dist.ReduceOp.MIN: "min",
    dist.ReduceOp.MAX: "max",
    dist.ReduceOp.AVG: "avg",
}


def _op_name(op: Any, what: str) -> str:
    kind = getattr(op, "op", op)  # ReduceOp -> RedOpType
    for k, v in _OPS.items():
        if kind == k:
            return v
    raise NotImplementedError(f"accl torch backend: {what} does not support reduce op {kind} "
                              f"(supported: SUM, PRODUCT, MIN, MAX, AVG)")


def _np_view(t: torch.Tensor, what: str) -> np.ndarray:
    """A NumPy array sharing memory with the contiguous CPU tensor ``t``."""
    if t.device.type != "cpu":
        raise ValueError(f"accl torch backend: {what} needs CPU tensors, got one on {t.device} "
                         "(the accl backend runs ACCL host mode)")
    if t.is_sparse or t.is_complex():
        raise TypeError(f"accl torch backend: {what}: unsupported tensor {t.dtype} layout {t.layout}")
    try:
        view_dtype, np_dtype = _DTYPES[t.dtype]
    except KeyError:
        raise TypeError(f"accl torch backend: {what}: unsupported dtype {t.dtype}") from None
    t = t.detach()
    if view_dtype is not None:
        t = t.view(view_dtype)
    a = t.numpy()
    if a.dtype != np_dtype:
        a = a.view(np_dtype)
    return a


class _Buf:
    """A tensor's NumPy view; a contiguous temporary (copied back by ``done``) when needed."""

    __slots__ = ("tensor", "tmp", "array")

    def __init__(self, t: torch.Tensor, what: str, *, read_only: bool = False):
        self.tensor = t
        self.tmp = None
        if not t.is_contiguous():
            self.tmp = t.detach().contiguous()
            self.array = _np_view(self.tmp, what)
        else:
            self.array = _np_view(t, what)
        if read_only:
            self.tmp = None  # nothing to copy back

    def done(self) -> None:
        if self.tmp is not None:
            with torch.no_grad():
                self.tensor.copy_(self.tmp)


def _done_work(result: Any) -> Any:
    fut: Future = Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


def _flat(ts: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1) for t in ts])


class ProcessGroupACCL(dist.ProcessGroup):
    """A ``torch.distributed`` process group over one ``accl.Communicator``."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: timedelta | None = None):
        super().__init__(rank, size)
        self._rank = rank
        self._size = size
        if rank == 0:
            uid = accl.get_unique_id()
            store.set(_UID_KEY, uid)
        else:
            uid = bytes(store.get(_UID_KEY))  # blocks up to the store's timeout
        self.comm = accl.Communicator(size, uid, rank)

    # -- identity -----------------------------------------------------------
    def getBackendName(self) -> str:
        return BACKEND_NAME

    def name(self) -> str:
        return BACKEND_NAME

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return self._rank

    def __repr__(self) -> str:
        return f"ProcessGroupACCL(rank={self._rank}, size={self._size})"

    def shutdown(self) -> None:
        self.comm.destroy()

    def abort(self) -> None:
        self.comm.abort()

    # -- helpers ------------------------------------------------------------
    @contextlib.contextmanager
    def _maybe_group(self, n: int):
        if n > 1:
            with accl.group():
                yield
        else:
            yield

    def _unsupported(self, op: str):
        raise NotImplementedError(f"accl torch backend: {op} is not supported")

    # -- collectives --------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "allreduce")
        bufs = [_Buf(t, "allreduce") for t in tensors]
        with self._maybe_group(len(bufs)):
            for b in bufs:
                self.comm.allreduce(b.array, b.array, op)
        for b in bufs:
            b.done()
        return _done_work(list(tensors))

    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    def barrier(self, opts=None):
        x = torch.zeros(1, dtype=torch.float32)
        a = x.numpy()
        self.comm.allreduce(a, a, "sum")
        return _done_work([x])

    def broadcast(self, tensors, opts=None):
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        root = opts.rootRank if opts is not None else 0
        bufs = [_Buf(t, "broadcast") for t in tensors]
        with self._maybe_group(len(bufs)):
            for b in bufs:
                self.comm.broadcast(b.array, b.array, root=root)
        for b in bufs:
            b.done()
        return _done_work(list(tensors))

    def reduce(self, tensors, opts=None):
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        root = opts.rootRank if opts is not None else 0
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "reduce")
        bufs = [_Buf(t, "reduce") for t in tensors]
        with self._maybe_group(len(bufs)):
            for b in bufs:
                self.comm.reduce(b.array, b.array, op, root=root)
        if self._rank == root:
            for b in bufs:
                b.done()
        return _done_work(list(tensors))

    def allgather(self, output_tensors, input_tensors, opts=None):
        # output_tensors: [[t_0 .. t_{n-1}]], input_tensors: [t]
        if len(input_tensors) != 1 or len(output_tensors) != 1:
            self._unsupported("allgather with more than one tensor per rank")
        inp, outs = input_tensors[0], output_tensors[0]
        if len(outs) != self._size:
            raise ValueError(f"accl torch backend: allgather needs {self._size} output tensors, got {len(outs)}")
        src = _Buf(inp, "allgather", read_only=True)
        tmp = torch.empty((self._size,) + tuple(inp.shape), dtype=inp.dtype)
        self.comm.allgather(src.array, _np_view(tmp, "allgather"))
        with torch.no_grad():
            for i, o in enumerate(outs):
                o.copy_(tmp[i].reshape(o.shape))
        return _done_work(output_tensors)

    def allgather_coalesced(self, output_tensor_lists, input_tensors, opts=None):
        self._unsupported("allgather_coalesced")

    def all_gather_single(self, output, input, opts=None):
        if output.numel() != input.numel() * self._size:
            raise ValueError("accl torch backend: all_gather_into_tensor: output must have "
                             f"{self._size} x input's elements")
        src = _Buf(input, "all_gather_into_tensor", read_only=True)
        dst = _Buf(output, "all_gather_into_tensor")
        self.comm.allgather(src.array, dst.array)
        dst.done()
        return _done_work([output])

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        srcs = [_Buf(t, "all_gather_into_tensor", read_only=True) for t in inputs]
        dsts = [_Buf(t, "all_gather_into_tensor") for t in outputs]
        with self._maybe_group(len(srcs)):
            for s, d in zip(srcs, dsts):
                self.comm.allgather(s.array, d.array)
        for d in dsts:
            d.done()
        return _done_work(list(outputs))

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        # output_tensors: [t], input_tensors: [[t_0 .. t_{n-1}]]
        if len(output_tensors) != 1 or len(input_tensors) != 1:
            self._unsupported("reduce_scatter with more than one tensor per rank")
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "reduce_scatter")
        out, ins = output_tensors[0], input_tensors[0]
        if len(ins) != self._size or any(t.numel() != out.numel() for t in ins):
            raise ValueError(f"accl torch backend: reduce_scatter needs {self._size} inputs "
                             "each of the output's size")
        src = _flat(ins)
        dst = _Buf(out, "reduce_scatter")
        self.comm.reduce_scatter(_np_view(src, "reduce_scatter"), dst.array, op)
        dst.done()
        return _done_work(output_tensors)

    def reduce_scatter_single(self, output, input, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "reduce_scatter_tensor")
        if input.numel() != output.numel() * self._size:
            raise ValueError("accl torch backend: reduce_scatter_tensor: input must have "
                             f"{self._size} x output's elements")
        src = _Buf(input, "reduce_scatter_tensor", read_only=True)
        dst = _Buf(output, "reduce_scatter_tensor")
        self.comm.reduce_scatter(src.array, dst.array, op)
        dst.done()
        return _done_work([output])

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "reduce_scatter_tensor")
        srcs = [_Buf(t, "reduce_scatter_tensor", read_only=True) for t in inputs]
        dsts = [_Buf(t, "reduce_scatter_tensor") for t in outputs]
        with self._maybe_group(len(srcs)):
            for s, d in zip(srcs, dsts):
                self.comm.reduce_scatter(s.array, d.array, op)
        for d in dsts:
            d.done()
        return _done_work(list(outputs))

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def all_to_all_single(self, output, input, output_split_sizes=None, input_split_sizes=None, opts=None):
        n = self._size
        if input.numel() != output.numel():
            raise ValueError("accl torch backend: all_to_all_single: input and output must have the same size")
        if input.dim() == 0 or input.shape[0] % n:
            raise ValueError(f"accl torch backend: all_to_all_single: dim 0 must divide by {n}")
        rows = input.shape[0] // n
        for name, splits in (("output_split_sizes", output_split_sizes), ("input_split_sizes", input_split_sizes)):
            if splits and any(int(s) != rows for s in splits):
                raise NotImplementedError(
                    f"accl torch backend: all_to_all_single with unequal splits ({name}={list(splits)}) "
                    "is not supported; only equal splits (ncclAlltoAll)")
        src = _Buf(input, "all_to_all_single", read_only=True)
        dst = _Buf(output, "all_to_all_single")
        self.comm.alltoall(src.array, dst.array)
        dst.done()
        return _done_work([output])

    alltoall_base = all_to_all_single

    def alltoall(self, output_tensors, input_tensors, opts=None):
        n = self._size
        if len(input_tensors) != n or len(output_tensors) != n:
            raise ValueError(f"accl torch backend: all_to_all needs {n} input and output tensors")
        sizes = {t.numel() for t in input_tensors} | {t.numel() for t in output_tensors}
        if len(sizes) != 1:
            raise NotImplementedError("accl torch backend: all_to_all with tensors of different sizes is not supported")
        src = _flat(input_tensors)
        tmp = torch.empty_like(src)
        self.comm.alltoall(_np_view(src, "all_to_all"), _np_view(tmp, "all_to_all"))
        with torch.no_grad():
            for o, piece in zip(output_tensors, tmp.chunk(n)):
                o.copy_(piece.reshape(o.shape))
        return _done_work(list(output_tensors))

    def _check_list(self, op, name, tensors, like):
        # The root's list: one tensor per rank, each the size and dtype of
        # `like` (checked before the call, as torch's NCCL backend does).
        if len(tensors) != self._size:
            raise ValueError(f"accl torch backend: {op} needs {self._size} tensors in {name}, got {len(tensors)}")
        for i, t in enumerate(tensors):
            if t.numel() != like.numel() or t.dtype != like.dtype:
                raise ValueError(f"accl torch backend: {op}: {name}[{i}] is {t.numel()} x {t.dtype}, "
                                 f"not {like.numel()} x {like.dtype} like this rank's tensor")

    def gather(self, output_tensors, input_tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        if len(input_tensors) != 1:
            self._unsupported("gather with more than one input tensor")
        inp = input_tensors[0]
        src = _Buf(inp, "gather", read_only=True)
        if self._rank == root:
            outs = output_tensors[0]
            self._check_list("gather", "gather_list", outs, inp)
            tmp = torch.empty((self._size,) + tuple(inp.shape), dtype=inp.dtype)
            self.comm.gather(src.array, _np_view(tmp, "gather"), root=root)
            with torch.no_grad():
                for i, o in enumerate(outs):
                    o.copy_(tmp[i].reshape(o.shape))
        else:
            self.comm.gather(src.array, None, root=root)
        return _done_work(output_tensors)

    def scatter(self, output_tensors, input_tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        if len(output_tensors) != 1:
            self._unsupported("scatter with more than one output tensor")
        out = output_tensors[0]
        dst = _Buf(out, "scatter")
        if self._rank == root:
            self._check_list("scatter", "scatter_list", input_tensors[0], out)
            src = _flat(input_tensors[0])
            self.comm.scatter(_np_view(src, "scatter"), dst.array, root=root)
        else:
            self.comm.scatter(None, dst.array, root=root)
        dst.done()
        return _done_work(output_tensors)

    # -- point-to-point -----------------------------------------------------
    def send(self, tensors, dst, tag=0):
        bufs = [_Buf(t, "send", read_only=True) for t in tensors]
        with self._maybe_group(len(bufs)):
            for b in bufs:
                self.comm.send(b.array, dst)
        return _done_work(list(tensors))

    def recv(self, tensors, src, tag=0):
        bufs = [_Buf(t, "recv") for t in tensors]
        with self._maybe_group(len(bufs)):
            for b in bufs:
                self.comm.recv(b.array, src)
        for b in bufs:
            b.done()
        return _done_work(list(tensors))

    def recv_anysource(self, tensors, tag=0):
        self._unsupported("recv from any source (recv without src)")

    def monitored_barrier(self, *args, **kwargs):
        self._unsupported("monitored_barrier")


def create_process_group(store, rank, size, timeout=None) -> ProcessGroupACCL:
    """The creator registered with ``torch.distributed.Backend.register_backend``."""
    return ProcessGroupACCL(store, rank, size, timeout)


def _register() -> None:
    if BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    dist.Backend.register_backend(BACKEND_NAME, create_process_group, devices=["cpu"])


_register()
