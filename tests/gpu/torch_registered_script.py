"""An ordinary torch.distributed program ("nccl" backend, every rank on cuda:0),
run by test_torch_nccl.py under `accl-run torchrun` with the ranks as
processes on the one GPU under MPS. With
TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1 torch registers its caching
allocator's segments with ncclCommRegister, and ACCL then runs the collectives
direct between the processes; without it they take the ring. Either way the
results must be exact: every input is small integers in float32, so every sum
is exact and the reference is integer arithmetic.

Prints the calls it made on allocated-then-synchronised tensors ("checked N")
and the time of a 64 MiB all_reduce ("rank R allreduce 64 MiB: T us"), then
"SCRIPT OK"."""
import os
import time

import torch
import torch.distributed as dist

SIZES = (1, 1000, 1 << 18, (1 << 22) + 3)  # elements: from one float to 16 MiB and a tail
BENCH_ELEMS = 16 << 20  # 64 MiB of float32


def value(rank, n, dev):
    """Rank `rank`'s input: i % 97 + 1 + 3 * rank, exact in float32."""
    return (torch.arange(n, device=dev, dtype=torch.int64) % 97 + 1 + 3 * rank).to(torch.float32)


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)  # the communicator now, so its segments are registered now

    # Every buffer first, then a barrier: by the calls every rank has
    # registered its segments, and each call maps its peers' before it runs.
    bufs = []
    for n in SIZES:
        bufs.append({
            "allreduce": value(rank, n, dev),
            "gather_in": value(rank, n, dev),
            "gather_out": torch.empty(world * n, device=dev),
            "scatter_in": value(rank, world * n, dev),
            "scatter_out": torch.empty(n, device=dev),
            "bcast": value(rank, n, dev),
            "reduce": value(rank, n, dev),
        })
    bench = torch.ones(BENCH_ELEMS, device=dev)
    dist.barrier()
    torch.cuda.synchronize()

    checked = 0
    root = world - 1
    for n, b in zip(SIZES, bufs):
        dist.all_reduce(b["allreduce"])
        dist.all_gather_into_tensor(b["gather_out"], b["gather_in"])
        dist.reduce_scatter_tensor(b["scatter_out"], b["scatter_in"])
        dist.broadcast(b["bcast"], src=root)
        dist.reduce(b["reduce"], dst=0)
        checked += 5
        # Integer references on the CPU: sum over ranks of i % 97 + 1 + 3r.
        i = torch.arange(world * n, dtype=torch.int64) % 97 + 1
        tri = 3 * world * (world - 1) // 2
        total = (world * i[:n] + tri).to(torch.float32)
        assert torch.equal(b["allreduce"].cpu(), total), f"rank {rank}: all_reduce of {n}"
        want = torch.cat([(i[:n] + 3 * r).to(torch.float32) for r in range(world)])
        assert torch.equal(b["gather_out"].cpu(), want), f"rank {rank}: all_gather of {n}"
        part = (world * i[rank * n:(rank + 1) * n] + tri).to(torch.float32)
        assert torch.equal(b["scatter_out"].cpu(), part), f"rank {rank}: reduce_scatter of {n}"
        assert torch.equal(b["bcast"].cpu(), (i[:n] + 3 * root).to(torch.float32)), f"rank {rank}: broadcast of {n}"
        if rank == 0:
            assert torch.equal(b["reduce"].cpu(), total), f"rank {rank}: reduce of {n}"

    for _ in range(5):
        dist.all_reduce(bench)
    torch.cuda.synchronize()
    reps = 20
    t0 = time.perf_counter()
    for _ in range(reps):
        dist.all_reduce(bench)
    torch.cuda.synchronize()
    us = (time.perf_counter() - t0) / reps * 1e6
    checked += 5 + reps
    assert bench[:4].tolist() == [float(world) ** (5 + reps)] * 4, f"rank {rank}: bench {bench[:4].tolist()}"
    print(f"rank {rank} checked {checked}", flush=True)
    print(f"rank {rank} allreduce 64 MiB: {us:.1f} us", flush=True)
    dist.destroy_process_group()
    print("SCRIPT OK", flush=True)


if __name__ == "__main__":
    main()
