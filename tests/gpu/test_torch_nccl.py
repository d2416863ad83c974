"""Stock torch.distributed "nccl" backend on CUDA tensors, with ACCL's
libnccl.so.2 preloaded in front of the one torch ships with: 2 ranks (2
processes) on the one GPU. Each rank computes every expected result on the CPU
and compares; ncclGetVersion proves which library answered."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

_spec = importlib.util.find_spec("torch")
if _spec is None or _spec.origin is None:
    pytest.skip("torch is not installed", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

NRANKS = 2
HERE = os.path.abspath(__file__)


def _spawn(suite: str, timeout: float = 240.0, hosts: bool = False) -> None:
    import accl
    import rank_workers  # tests/, on the path under pytest (not in the worker processes)

    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA")
    # hosts: every rank its own NCCL_HOSTID, so device buffers go between
    # "hosts" (staged through pinned host memory, sockets between the proxies).
    rank_workers.spawn(HERE, suite, NRANKS, timeout, LD_PRELOAD=accl.library_path(), ACCL_TIMEOUT="60",
                       PYTHONWARNINGS="ignore", ACCL_TEST_HOST_PER_RANK="1" if hosts else "0")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("hosts", [False, True], ids=["one_host", "host_per_rank"])
def test_collectives(hosts):
    _spawn("collectives", hosts=hosts)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("hosts", [False, True], ids=["one_host", "host_per_rank"])
def test_ddp_matches_single_process(hosts):
    _spawn("ddp", hosts=hosts)


def _torchrun(script, nproc, base_env=None, **env):
    """Runs `script` under `accl-run torchrun` in `base_env` (default: this
    process's) with `env` on top; returns the ranks' output."""
    # The scripts know nothing of ACCL; accl-run puts ACCL in front.
    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA")
    path = os.path.join(os.path.dirname(HERE), script)
    cmd = [sys.executable, "-m", "accl.run", sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={nproc}", path]
    env = {**(os.environ if base_env is None else base_env), "NCCL_SOCKET_IFNAME": "lo", "ACCL_TIMEOUT": "120",
           "PYTHONWARNINGS": "ignore", "NCCL_DEBUG": "VERSION", **env}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=560)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-8000:]
    assert out.count("SCRIPT OK") == nproc, out[-8000:]
    assert "ACCL" in out  # NCCL_DEBUG=VERSION (or INFO) names the library in use
    print("".join(line + "\n" for line in out.splitlines() if line.startswith("rank ")))
    return out


@pytest.mark.timeout(600)
@pytest.mark.parametrize("nproc", [2, 4, 8])
def test_unchanged_script_under_accl_run_torchrun(nproc):
    # 8 processes time-share the one GPU (no MPS): fewer DDP steps keep it short.
    _torchrun("torchrun_script.py", nproc, **({"STEPS": "50"} if nproc == 8 else {}))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("nproc", [2, 4])
def test_fsdp2_under_accl_run_torchrun(nproc):
    pytest.importorskip("torch.distributed.fsdp")
    from torch.distributed import fsdp

    if not hasattr(fsdp, "fully_shard"):
        pytest.skip("this torch has no FSDP2 (fully_shard)")
    _torchrun("fsdp2_script.py", nproc)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("hook", ["1", "0"], ids=["allocator_hook", "no_hook"])
def test_torch_registered_segments_run_direct_under_mps(mps, hook):
    """2 processes on the one GPU under MPS. With torch's allocator hook its
    segments are registered, and every call after the script's barrier runs
    direct on every rank; without it every call takes the ring. The results
    are exact either way (the script checks them)."""
    from procs import RAN

    out = _torchrun("torch_registered_script.py", 2, base_env=mps, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,COLL",
                    TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=hook)
    checked = [int(c) for c in re.findall(r"rank \d+ checked (\d+)", out)]
    counts = [(int(d), int(r)) for d, r in RAN.findall(out)]
    assert len(checked) == 2 and len(counts) == 2, out[-8000:]
    if hook == "1":
        assert all(d >= checked[0] for d, _ in counts), (counts, checked)
    else:
        assert all(d == 0 and r >= checked[0] for d, r in counts), (counts, checked)


@pytest.mark.timeout(300)
def test_torch_watchdog_sees_a_dead_rank(monkeypatch):
    # Rank 1 dies between collectives; rank 0's next all_reduce waits for it in
    # a kernel. torch's watchdog (timeout 15 s) aborts the communicator, which
    # must stop the kernel, so rank 0 fails instead of hanging.
    import accl
    import rank_workers

    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA")
    monkeypatch.delenv("ACCL_TIMEOUT", raising=False)  # only torch's watchdog may end the wait
    procs = rank_workers.start(HERE, "dead_peer", 2, LD_PRELOAD=accl.library_path(), PYTHONWARNINGS="ignore")
    outs = rank_workers.collect(procs, "rank 0 after rank 1 died", 240)
    assert procs[1].returncode == 17, outs[1][-3000:]
    assert procs[0].returncode != 0, outs[0][-6000:]
    assert "dead_peer OK" not in outs[0]


# --------------------------------------------------------------------------
# worker side


def _inp(r, shape=(6,), dtype=None, base=1.0):
    dtype = dtype or torch.float32
    x = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float64).reshape(shape)
    return ((x % 5) + base + r * 2).to(dtype)


def _assert_accl_is_loaded() -> None:
    # torch.cuda.nccl.version() is the version torch was built with, and torch
    # also maps NVIDIA's libnccl.so.2 by path; what counts is where libtorch's
    # nccl* references bind: the global scope, where the preloaded library is
    # first. Ask that scope.
    import ctypes

    import accl

    maps = {line.split()[-1] for line in open("/proc/self/maps") if "libnccl" in line}
    assert os.path.realpath(accl.library_path()) in maps, maps
    scope = ctypes.CDLL(None)
    v = ctypes.c_int()
    assert scope.ncclGetVersion(ctypes.byref(v)) == 0 and v.value == 23007, v.value  # ours: 2.30.7
    assert hasattr(scope, "acclQueryMode")  # an ACCL extension, in no NVIDIA build


def _suite_collectives(rank: int, n: int) -> None:
    import torch.distributed as dist

    _assert_accl_is_loaded()
    dev = torch.device("cuda", 0)
    eq = torch.testing.assert_close

    refs = {
        dist.ReduceOp.SUM: lambda xs: sum(xs[1:], xs[0].clone()),
        dist.ReduceOp.PRODUCT: lambda xs: torch.stack(xs).prod(0),
        dist.ReduceOp.MIN: lambda xs: torch.stack(xs).min(0).values,
        dist.ReduceOp.MAX: lambda xs: torch.stack(xs).max(0).values,
        dist.ReduceOp.AVG: lambda xs: torch.stack(xs).double().mean(0),
    }
    for shape in ((3, 5), (1 << 20,), (3, 1000003)):
        for dtype in (torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16,
                      torch.uint8):
            for op, ref in refs.items():
                if op == dist.ReduceOp.AVG and not dtype.is_floating_point:
                    continue
                if op == dist.ReduceOp.PRODUCT and shape != (3, 5):
                    continue  # overflows, and says nothing new
                x = _inp(rank, shape, dtype).to(dev)
                dist.all_reduce(x, op=op)
                want = ref([_inp(r, shape, dtype) for r in range(n)]).to(dtype)
                eq(x.cpu(), want, msg=f"allreduce {op} {dtype} {shape}")

    for root in range(n):
        x = _inp(rank, (1000001,), torch.float64).to(dev)
        dist.broadcast(x, src=root)
        eq(x.cpu(), _inp(root, (1000001,), torch.float64))
        x = _inp(rank, (4097,)).to(dev)
        dist.reduce(x, dst=root, op=dist.ReduceOp.MAX)
        eq(x.cpu(), _inp(n - 1, (4097,)) if rank == root else _inp(rank, (4097,)))

    out = torch.empty(n * 300007, dtype=torch.bfloat16, device=dev)
    dist.all_gather_into_tensor(out, _inp(rank, (300007,), torch.bfloat16).to(dev))
    eq(out.cpu(), torch.cat([_inp(r, (300007,), torch.bfloat16) for r in range(n)]))
    outs = [torch.empty(2, 3, device=dev) for _ in range(n)]
    dist.all_gather(outs, _inp(rank, (2, 3)).to(dev))
    for r in range(n):
        eq(outs[r].cpu(), _inp(r, (2, 3)))

    out = torch.empty(70001, device=dev)
    dist.reduce_scatter_tensor(out, _inp(rank, (n * 70001,)).to(dev))
    full = sum(_inp(r, (n * 70001,)) for r in range(n))
    eq(out.cpu(), full[rank * 70001:(rank + 1) * 70001])

    inp = _inp(rank, (n * 2, 3)).to(dev)
    out = torch.empty_like(inp)
    dist.all_to_all_single(out, inp)
    eq(out.cpu(), torch.cat([_inp(r, (n * 2, 3))[rank * 2:(rank + 1) * 2] for r in range(n)]))

    for src in range(n):
        dst = (src + 1) % n
        if rank == src:
            dist.send(_inp(src, (900001,)).to(dev), dst)
        elif rank == dst:
            y = torch.empty(900001, device=dev)
            dist.recv(y, src)
            eq(y.cpu(), _inp(src, (900001,)))

    # many calls in flight on the stream, one wait at the end
    xs = [_inp(rank, (4096,)).to(dev) for _ in range(64)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    for w in works:
        w.wait()
    for x in xs:
        eq(x.cpu(), sum(_inp(r, (4096,)) for r in range(n)))
    dist.barrier()


def _suite_ddp(rank: int, n: int) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    _assert_accl_is_loaded()
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    ref = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    ref.load_state_dict(model.state_dict())
    ddp = DDP(model.to(dev), device_ids=[0])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        data = [torch.randn(16, 64, generator=g) for _ in range(n)]
        opt.zero_grad()
        ddp(data[rank].to(dev)).square().mean().backward()
        opt.step()
        ref_opt.zero_grad()
        sum(ref(d).square().mean() for d in data).div(n).backward()
        ref_opt.step()
    for p, q in zip(ddp.module.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-5)
    dist.barrier()


def _suite_dead_peer(rank: int, n: int) -> None:
    import torch.distributed as dist

    dev = torch.device("cuda", 0)
    x = torch.ones(1 << 20, device=dev)
    for _ in range(5):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    if rank == 1:
        os._exit(17)
    for _ in range(1000):  # never completes: rank 1 is gone
        dist.all_reduce(x)
        torch.cuda.synchronize()


def _worker(suite: str, rank: int) -> None:
    import datetime

    import torch.distributed as dist

    n = int(os.environ["WORLD_SIZE"])
    if os.environ.get("ACCL_TEST_HOST_PER_RANK") == "1":
        os.environ["NCCL_HOSTID"] = f"accl-test-host-{rank}"  # read by the library at the first init
    torch.cuda.set_device(0)
    timeout = datetime.timedelta(seconds=15 if suite == "dead_peer" else 120)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=torch.device("cuda", 0), timeout=timeout)
    try:
        globals()[f"_suite_{suite}"](rank, n)
        torch.cuda.synchronize()
    finally:
        dist.destroy_process_group()
    print(f"{suite} OK", flush=True)


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--worker":
    _worker(sys.argv[2], int(sys.argv[3]))
