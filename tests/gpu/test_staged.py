"""Device buffers between hosts (coll/dev_staged.cc): each process its own
NCCL_HOSTID on the one GPU, so every operation is staged through pinned host
memory and the proxies' sockets (staged_worker.py runs each rank): calls queued
far ahead of the GPU, and an abort while a staged call waits for its peer."""
import os
import time
from pathlib import Path

import pytest

pytest.importorskip("cupy")
import procs  # noqa: E402

WORKER = Path(__file__).with_name("staged_worker.py")


@pytest.mark.parametrize("write", ["1", "0"], ids=["stream_write", "kernel_write"])
def test_calls_queued_far_ahead_of_the_gpu(write):
    # Both hand-overs: the stream's own write of `go` (the H200's driver has
    # cuStreamWriteValue64), and a kernel's (ACCL_STAGE_STREAM_WRITE=0).
    env = dict(os.environ, ACCL_TIMEOUT="60", ACCL_STAGE_STREAM_WRITE=write, NCCL_DEBUG="INFO",
               NCCL_DEBUG_SUBSYS="INIT")
    outs = procs.run_procs(WORKER, "far_ahead", 2, env, 120, host_per_rank=True)
    how = "a stream write" if write == "1" else "a kernel"
    for out in outs:
        assert f"staged operations are handed to the proxy by {how}" in out, out[-3000:]


def test_abort_ends_a_waiting_staged_call():
    t0 = time.monotonic()
    procs.run_procs(WORKER, "abort", 2, dict(os.environ, ACCL_TIMEOUT="60"), 60, host_per_rank=True)
    assert time.monotonic() - t0 < 40  # well before ACCL_TIMEOUT
