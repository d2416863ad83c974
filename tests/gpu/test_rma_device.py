"""Windows of device memory and one-sided operations on the GPU
(rma_device_worker.py runs each rank): ranks as threads of this process on the
one GPU, as separate processes (CUDA IPC), and as processes on separate
"hosts" (NCCL_HOSTID: staged through the proxy and sockets); graph capture;
the timeout; a peer that dies while a wait kernel or a collective's kernel
runs; host and device windows mixed are refused."""
import os
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("cupy")
import procs  # noqa: E402
import rma_device_worker as worker  # noqa: E402

WORKER = Path(__file__).with_name("rma_device_worker.py")


def run_threads(scenario, nranks):
    uid = worker.uid_new()
    errors = []

    def rank_main(r):
        try:
            worker.SCENARIOS[scenario](r, nranks, uid)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(f"rank {r}: {e!r}")

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(nranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    assert not errors, errors


def run_procs(scenario, nranks, extra=None, timeout=60, host_per_rank=False):
    return procs.run_procs(WORKER, scenario, nranks, dict(os.environ, **(extra or {})), timeout, host_per_rank)


@pytest.mark.parametrize("nranks", [2, 4])
def test_exchange_threads(nranks):
    run_threads("exchange", nranks)


def test_exchange_processes():
    run_procs("exchange", 2)


def test_exchange_between_hosts():
    run_procs("exchange", 3, host_per_rank=True)


def test_graph_capture_and_replay():
    run_threads("graph", 2)


def test_graph_between_hosts():
    run_procs("graph", 2, host_per_rank=True)


def test_wait_times_out_with_the_peer_named():
    t0 = time.monotonic()
    run_procs("timeout", 2, extra={"ACCL_TIMEOUT": "5"})
    assert time.monotonic() - t0 < 60


def test_a_dead_peer_ends_a_waiting_kernel():
    t0 = time.monotonic()
    run_procs("dead", 2, extra={"ACCL_TIMEOUT": "60"})
    assert time.monotonic() - t0 < 40  # well before ACCL_TIMEOUT


@pytest.mark.parametrize("scenario", ["dead_in_collective", "dead_in_collective_unpolled"])
def test_a_dead_peer_ends_a_waiting_collective(scenario):
    """Polling ncclCommGetAsyncError, or only waiting on the stream."""
    t0 = time.monotonic()
    run_procs(scenario, 2, extra={"ACCL_TIMEOUT": "120"}, timeout=100)
    assert time.monotonic() - t0 < 60  # well before ACCL_TIMEOUT


def test_host_and_device_windows_do_not_mix():
    run_threads("mixed", 2)

