"""Device buffers between hosts: each process its own NCCL_HOSTID on the one
GPU (staged_worker.py runs each rank). Staged through pinned host memory and
the proxies' sockets (coll/dev_staged.cc, the default), or the ring's kernels
over the network connections' pinned FIFOs (ACCL_NET_KERNELS=1): calls
queued far ahead of the GPU, an abort while a call waits for its peer, and
staged calls cut into chunks alike whatever buffers each rank passes."""
import os
import time
from pathlib import Path

import pytest

pytest.importorskip("cupy")
import procs  # noqa: E402

WORKER = Path(__file__).with_name("staged_worker.py")


@pytest.mark.parametrize("kernels,write", [("0", "1"), ("0", "0"), ("1", "1")],
                         ids=["stream_write", "kernel_write", "net_kernels"])
def test_calls_queued_far_ahead_of_the_gpu(kernels, write):
    # Staged, with both hand-overs: the stream's own write of `go` (the
    # H200's driver has cuStreamWriteValue64), and a kernel's
    # (ACCL_STAGE_STREAM_WRITE=0); then the ring's kernels, whose proxies
    # poll the FIFOs the kernels fill and drain.
    env = dict(os.environ, ACCL_TIMEOUT="60", ACCL_NET_KERNELS=kernels, ACCL_STAGE_STREAM_WRITE=write,
               NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT")
    outs = procs.run_procs(WORKER, "far_ahead", 2, env, 120, host_per_rank=True)
    how = "a stream write" if write == "1" else "a kernel"
    for out in outs:
        if kernels == "1":
            assert "the ring's collectives run in kernels (to rank" in out, out[-3000:]
            assert "by net (" in out and "cuda-ipc" not in out, out[-3000:]
            assert "staged operations are handed" not in out, out[-3000:]
        else:
            assert f"staged operations are handed to the proxy by {how}" in out, out[-3000:]


@pytest.mark.parametrize("kernels", ["0", "1"], ids=["staged", "net_kernels"])
def test_abort_ends_a_call_waiting_for_its_peer(kernels):
    t0 = time.monotonic()
    procs.run_procs(WORKER, "abort", 2, dict(os.environ, ACCL_TIMEOUT="60", ACCL_NET_KERNELS=kernels), 60,
                    host_per_rank=True)
    assert time.monotonic() - t0 < 40  # well before ACCL_TIMEOUT


@pytest.mark.parametrize("nranks", [2, 3])
def test_chunks_pair_up_across_buffer_kinds(nranks):
    # Rank 0 device buffers, the others host buffers, 64 KiB chunks: each
    # rank cuts the calls alike (staged chunks, or host chunks) and the
    # results are exact; PreMulSum's device scalar is read by every chunk.
    # Staged only: a ring kernel pairs up only with kernels.
    env = dict(os.environ, ACCL_TIMEOUT="60", ACCL_STAGE_CHUNK_BYTES="65536", ACCL_NET_KERNELS="0",
               NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="COLL")
    outs = procs.run_procs(WORKER, "chunks", nranks, env, 120, host_per_rank=True)
    assert "staged in 13 chunks of 8192 elements" in outs[0], outs[0][-3000:]
