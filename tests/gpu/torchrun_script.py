"""An ordinary torch.distributed program, with nothing ACCL-specific in it: run
under `accl-run torchrun --nproc_per_node=N torchrun_script.py`. Backend "nccl",
every rank on cuda:0 when there is one GPU. Checks each collective against a
CPU reference, then trains a small model with DDP for STEPS steps and compares
every step's loss with a single-process reference. Prints "SCRIPT OK"."""
import os
import sys

import torch
import torch.distributed as dist

STEPS = int(os.environ.get("STEPS", "200"))


def inp(r, n, dtype=torch.float32):
    return ((torch.arange(n, dtype=torch.float64) % 7) + 1 + 3 * r).to(dtype)


def check_collectives(rank, world, dev):
    eq = torch.testing.assert_close
    x = inp(rank, 1 << 16).to(dev)
    dist.all_reduce(x)
    eq(x.cpu(), sum(inp(r, 1 << 16) for r in range(world)))

    out = torch.empty(world * 1000, device=dev)
    dist.all_gather_into_tensor(out, inp(rank, 1000).to(dev))
    eq(out.cpu(), torch.cat([inp(r, 1000) for r in range(world)]))

    out = torch.empty(1000, device=dev)
    dist.reduce_scatter_tensor(out, inp(rank, world * 1000).to(dev))
    eq(out.cpu(), sum(inp(r, world * 1000) for r in range(world))[rank * 1000:(rank + 1) * 1000])

    for root in range(world):
        x = inp(rank, 333, torch.bfloat16).to(dev)
        dist.broadcast(x, src=root)
        eq(x.cpu(), inp(root, 333, torch.bfloat16))
        x = inp(rank, 333).to(dev)
        dist.reduce(x, dst=root, op=dist.ReduceOp.MIN)
        if rank == root:
            eq(x.cpu(), inp(0, 333))

    a = inp(rank, world * 50).to(dev)
    b = torch.empty_like(a)
    dist.all_to_all_single(b, a)
    eq(b.cpu(), torch.cat([inp(r, world * 50)[rank * 50:(rank + 1) * 50] for r in range(world)]))

    nxt, prv = (rank + 1) % world, (rank - 1) % world
    if rank % 2 == 0:
        dist.send(inp(rank, 77).to(dev), nxt)
        y = torch.empty(77, device=dev)
        dist.recv(y, prv)
    else:
        y = torch.empty(77, device=dev)
        dist.recv(y, prv)
        dist.send(inp(rank, 77).to(dev), nxt)
    eq(y.cpu(), inp(prv, 77))

    y = torch.empty(88, device=dev)
    ops = [dist.P2POp(dist.isend, inp(rank, 88).to(dev), nxt), dist.P2POp(dist.irecv, y, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    eq(y.cpu(), inp(prv, 88))

    dist.barrier()

    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    if rank % 2 == 0:
        x = inp(rank, 64).to(dev)
        dist.all_reduce(x, group=evens)
        eq(x.cpu(), sum(inp(r, 64) for r in range(0, world, 2)))

    if hasattr(dist, "split_group") and world >= 2:
        halves = [list(range(0, world // 2)), list(range(world // 2, world))]
        sub = dist.split_group(split_ranks=halves)
        mine = halves[0] if rank in halves[0] else halves[1]
        x = inp(rank, 64).to(dev)
        dist.all_reduce(x, group=sub)
        eq(x.cpu(), sum(inp(r, 64) for r in mine))


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.Tanh(), torch.nn.Linear(128, 1))


def train(rank, world, dev):
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(model().to(dev), device_ids=[dev.index])
    ref = model()
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(42)
    w_true = torch.randn(32, 1, generator=g)
    worst = 0.0
    for step in range(STEPS):
        xs = [torch.randn(8, 32, generator=g) for _ in range(world)]
        ys = [x @ w_true for x in xs]
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(xs[rank].to(dev)), ys[rank].to(dev))
        loss.backward()
        opt.step()
        ref_opt.zero_grad()
        ref_loss = torch.nn.functional.mse_loss(ref(torch.cat(xs)), torch.cat(ys))
        ref_loss.backward()
        ref_opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        worst = max(worst, abs(mean.item() - ref_loss.item()) / max(ref_loss.item(), 1e-6))
    assert worst < 1e-3, f"loss differs from the reference by {worst:.2e} (relative)"
    return ref_loss.item(), worst


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    check_collectives(rank, world, dev)
    final, worst = train(rank, world, dev)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: {STEPS} DDP steps, final loss {final:.4g}, worst relative loss gap {worst:.1e}")
    print("SCRIPT OK", flush=True)


if __name__ == "__main__":
    sys.exit(main())
