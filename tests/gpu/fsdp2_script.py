"""FSDP2 (torch.distributed.fsdp.fully_shard) training with nothing ACCL-specific
in it: run under `accl-run torchrun --nproc_per_node=N fsdp2_script.py`.
Backend "nccl", every rank on cuda:0 when there is one GPU. Each layer and the
root are sharded (parameters all-gathered before use, gradients
reduce-scattered and averaged); every step's mean loss is compared with a
single-process reference trained on the whole batch, and at the end each
rank's full parameters (gathered) with the reference's. Prints "SCRIPT OK"."""
import os
import sys

import torch
import torch.distributed as dist

STEPS = int(os.environ.get("STEPS", "100"))


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.Tanh(), torch.nn.Linear(256, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 1))


def main():
    from torch.distributed.fsdp import fully_shard

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    net = model().to(dev)
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(net)
    ref = model().double()
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(7)
    w_true = torch.randn(32, 1, generator=g)
    worst = 0.0
    for _ in range(STEPS):
        xs = [torch.randn(16, 32, generator=g) for _ in range(world)]
        ys = [torch.sin(x @ w_true) for x in xs]
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(xs[rank].to(dev)), ys[rank].to(dev))
        loss.backward()
        opt.step()
        ref_opt.zero_grad()
        ref_loss = torch.nn.functional.mse_loss(ref(torch.cat(xs).double()), torch.cat(ys).double())
        ref_loss.backward()
        ref_opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        worst = max(worst, abs(mean.item() - ref_loss.item()) / max(ref_loss.item(), 1e-6))
    assert worst < 1e-3, f"loss differs from the reference by {worst:.2e} (relative)"
    # The sharded parameters, gathered, against the reference's.
    for (name, p), q in zip(net.named_parameters(), ref.parameters()):
        full = p.full_tensor().cpu().double()
        err = (full - q.detach()).abs().max().item()
        assert err < 1e-4, f"{name}: max difference {err:.2e} from the reference"
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: {STEPS} FSDP2 steps, final loss {ref_loss.item():.4g}, worst relative loss gap {worst:.1e}")
    print("SCRIPT OK", flush=True)


if __name__ == "__main__":
    sys.exit(main())
