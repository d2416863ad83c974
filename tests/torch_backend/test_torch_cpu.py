"""torch.distributed backend "accl" (accl.torch) on CPU tensors, 2 ranks.

Each test spawns 2 worker processes running this file (``--worker``); every
rank computes the expected result of each collective locally and compares.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback

import pytest

# Under pytest, tests/ is on sys.path, so this directory itself would import as a
# namespace package "torch" when torch is not installed: look before importing.
_spec = importlib.util.find_spec("torch")
if _spec is None or _spec.origin is None:
    pytest.skip("torch is not installed", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

NRANKS = 2
HERE = os.path.abspath(__file__)


def _spawn(suite: str, timeout: float = 50.0) -> None:
    import rank_workers  # tests/, on the path under pytest (not in the worker processes)

    rank_workers.spawn(HERE, suite, NRANKS, timeout, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore::FutureWarning")


@pytest.mark.timeout(60)
def test_collectives():
    _spawn("collectives")


@pytest.mark.timeout(60)
def test_ddp_matches_single_process():
    _spawn("ddp")


# --------------------------------------------------------------------------
# worker side


def _inp(r, shape=(6,), dtype=None, base=1.0):
    """Rank r's deterministic input."""
    dtype = dtype or torch.float32
    x = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float64).reshape(shape)
    return ((x % 5) + base + r * 2).to(dtype)


def _suite_collectives(rank: int, n: int) -> None:
    import torch.distributed as dist

    assert dist.get_backend() == "accl", dist.get_backend()
    eq = torch.testing.assert_close

    # allreduce, every op, a few dtypes
    refs = {
        dist.ReduceOp.SUM: lambda xs: sum(xs[1:], xs[0].clone()),
        dist.ReduceOp.PRODUCT: lambda xs: torch.stack(xs).prod(0),
        dist.ReduceOp.MIN: lambda xs: torch.stack(xs).min(0).values,
        dist.ReduceOp.MAX: lambda xs: torch.stack(xs).max(0).values,
        dist.ReduceOp.AVG: lambda xs: torch.stack(xs).double().mean(0),
    }
    for dtype in (torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16):
        for op, ref in refs.items():
            if op == dist.ReduceOp.AVG and not dtype.is_floating_point:
                continue
            x = _inp(rank, (3, 5), dtype)
            dist.all_reduce(x, op=op)
            want = ref([_inp(r, (3, 5), dtype) for r in range(n)]).to(dtype)
            eq(x, want, msg=f"allreduce {op} {dtype}")
    # non-contiguous tensor (goes through a temporary)
    x = _inp(rank, (4, 6)).t()
    dist.all_reduce(x)
    eq(x, sum(_inp(r, (4, 6)) for r in range(n)).t())
    # async_op returns a completed Work
    x = _inp(rank)
    w = dist.all_reduce(x, async_op=True)
    w.wait()
    assert w.is_completed()
    eq(x, sum(_inp(r) for r in range(n)))
    eq(w.get_future().value()[0], x)

    # broadcast
    for root in range(n):
        x = _inp(rank, (7,), torch.float64)
        dist.broadcast(x, src=root)
        eq(x, _inp(root, (7,), torch.float64))

    # reduce
    for root in range(n):
        x = _inp(rank, (5,))
        dist.reduce(x, dst=root, op=dist.ReduceOp.MAX)
        eq(x, _inp(n - 1, (5,)) if rank == root else _inp(rank, (5,)))

    # allgather (list) and all_gather_into_tensor
    outs = [torch.empty(2, 3) for _ in range(n)]
    dist.all_gather(outs, _inp(rank, (2, 3)))
    for r in range(n):
        eq(outs[r], _inp(r, (2, 3)))
    out = torch.empty(n * 4, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(out, _inp(rank, (4,), torch.bfloat16))
    eq(out, torch.cat([_inp(r, (4,), torch.bfloat16) for r in range(n)]))

    # reduce_scatter_tensor and reduce_scatter (list)
    out = torch.empty(3)
    dist.reduce_scatter_tensor(out, _inp(rank, (n * 3,)))
    full = sum(_inp(r, (n * 3,)) for r in range(n))
    eq(out, full[rank * 3:(rank + 1) * 3])
    out = torch.empty(3, dtype=torch.int64)
    dist.reduce_scatter(out, list(_inp(rank, (n * 3,), torch.int64).chunk(n)), op=dist.ReduceOp.MIN)
    eq(out, _inp(0, (n * 3,), torch.int64)[rank * 3:(rank + 1) * 3])

    # all_to_all_single (equal splits) and all_to_all (list)
    inp = _inp(rank, (n * 2, 3))
    out = torch.empty_like(inp)
    dist.all_to_all_single(out, inp)
    eq(out, torch.cat([_inp(r, (n * 2, 3))[rank * 2:(rank + 1) * 2] for r in range(n)]))
    out2 = torch.empty_like(inp)
    dist.all_to_all_single(out2, inp, [2] * n, [2] * n)
    eq(out2, out)
    outs = [torch.empty(4) for _ in range(n)]
    dist.all_to_all(outs, list(_inp(rank, (n * 4,)).chunk(n)))
    for r in range(n):
        eq(outs[r], _inp(r, (n * 4,))[rank * 4:(rank + 1) * 4])
    with pytest.raises(NotImplementedError, match="unequal splits"):
        dist.all_to_all_single(torch.empty(4), torch.ones(4), [1, 3], [3, 1])

    # gather / scatter
    g = [torch.empty(3) for _ in range(n)] if rank == 0 else None
    dist.gather(_inp(rank, (3,)), g, dst=0)
    if rank == 0:
        for r in range(n):
            eq(g[r], _inp(r, (3,)))
    out = torch.empty(3)
    dist.scatter(out, list(_inp(99, (n * 3,)).chunk(n)) if rank == 1 else None, src=1)
    eq(out, _inp(99, (n * 3,))[rank * 3:(rank + 1) * 3])
    if rank == 0:  # the root's list is checked before anything moves (no other rank takes part)
        with pytest.raises(ValueError, match=f"gather needs {n} tensors in gather_list, got {n - 1}"):
            dist.gather(_inp(rank, (3,)), [torch.empty(3) for _ in range(n - 1)], dst=0)
        with pytest.raises(ValueError, match=r"scatter: scatter_list\[1\] is 4 x torch.float32, not 3"):
            dist.scatter(torch.empty(3), [torch.empty(3), torch.empty(4)] + [torch.empty(3)] * (n - 2), src=0)

    # send / recv, both directions; isend / irecv
    for src in range(n):
        dst = (src + 1) % n
        if rank == src:
            dist.send(_inp(src, (9,)), dst)
        elif rank == dst:
            y = torch.empty(9)
            dist.recv(y, src)
            eq(y, _inp(src, (9,)))
    if rank == 0:
        dist.isend(_inp(0, (2,), torch.int8), 1).wait()
    else:
        y = torch.empty(2, dtype=torch.int8)
        dist.irecv(y, 0).wait()
        eq(y, _inp(0, (2,), torch.int8))

    # barrier
    dist.barrier()

    # subgroups: the whole world again, and one group per rank
    world2 = dist.new_group(list(range(n)))
    x = _inp(rank)
    dist.all_reduce(x, group=world2)
    eq(x, sum(_inp(r) for r in range(n)))
    singles = [dist.new_group([r]) for r in range(n)]
    x = _inp(rank)
    dist.all_reduce(x, group=singles[rank])
    eq(x, _inp(rank))
    assert dist.get_world_size(singles[rank]) == 1

    # a clear error for an unsupported op
    with pytest.raises(NotImplementedError, match="recv from any source"):
        dist.recv(torch.empty(1))
    with pytest.raises(ValueError, match="CPU tensors"):
        dist.all_reduce(torch.empty(1, device="meta"))
    dist.barrier()


def _suite_ddp(rank: int, n: int) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    steps, batch = 5, 8 * n

    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))

    gen = torch.Generator().manual_seed(1)
    X = torch.randn(steps, batch, 5, generator=gen)
    Y = torch.randn(steps, batch, 3, generator=gen)

    # single-process reference on the full batch
    ref = make()
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for s in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(ref(X[s]), Y[s]).backward()
        opt.step()

    model = DDP(make())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    shard = slice(rank * batch // n, (rank + 1) * batch // n)
    for s in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(X[s, shard]), Y[s, shard]).backward()
        opt.step()

    for (name, p), q in zip(model.module.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-6, atol=1e-7, msg=name)
        assert not torch.equal(p.detach(), make().state_dict()[name]), f"{name} did not train"
    # every rank ends with the same parameters
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    other = flat.clone()
    dist.broadcast(other, src=0)
    torch.testing.assert_close(flat, other, rtol=0, atol=0)


def _worker(suite: str, rank: int) -> int:
    import torch.distributed as dist

    import accl.torch  # noqa: F401  registers "accl"

    n = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("accl", rank=rank, world_size=n)
    try:
        {"collectives": _suite_collectives, "ddp": _suite_ddp}[suite](rank, n)
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)  # do not wait in destroy for a peer that may be stuck
    dist.destroy_process_group()
    print(f"{suite} OK", flush=True)
    return 0


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--worker":
    sys.exit(_worker(sys.argv[2], int(sys.argv[3])))
