"""Several processes on the one GPU under MPS (CUDA's Multi-Process Service):
the device connectors between processes (CUDA IPC) and the direct collectives
of one process must work the same with an MPS server in between (the `mps`
fixture of conftest.py starts a private MPS daemon)."""
import os
import re
import subprocess

import pytest
from nccl_table import Table

import accl


def _clients_connected(env):
    log = os.path.join(env["CUDA_MPS_LOG_DIRECTORY"], "control.log")
    return os.path.exists(log) and "NEW CLIENT" in open(log).read()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"])
def test_processes_under_mps(drivers, mps, name):
    env = dict(mps, NCCL_SOCKET_IFNAME="lo", ACCL_TIMEOUT="60", LD_LIBRARY_PATH=accl.lib_dir())
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "LD_LIBRARY_PATH", "-x",
           "NCCL_SOCKET_IFNAME", "-x", "ACCL_TIMEOUT", "-x", "CUDA_MPS_PIPE_DIRECTORY",
           str(drivers / f"{name}_perf"), "-b", "8", "-e", "8M", "-f", "8", "-n", "2", "-w", "1", "-c", "1",
           "-T", "120"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-6000:]
    t = Table(p.stdout)
    t.assert_clean()
    assert len(t.devices) == 2
    assert _clients_connected(mps)  # the processes ran through the MPS server


@pytest.mark.timeout(300)
def test_one_process_under_mps(drivers, mps):
    env = dict(mps, NCCL_SOCKET_IFNAME="lo", ACCL_TIMEOUT="60", LD_LIBRARY_PATH=accl.lib_dir())
    p = subprocess.run([str(drivers / "all_reduce_perf"), "-b", "8", "-e", "8M", "-f", "8", "-g", "2", "-c", "1",
                        "-n", "2", "-w", "1", "-T", "120"], capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-6000:]
    Table(p.stdout).assert_clean()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["all_reduce", "sendrecv", "alltoall"])
def test_ranks_with_different_channel_settings(drivers, mps, name):
    # Rank 0 asks for 16 channels per connector and 2 per send or receive (its
    # share would be 4), rank 1 for the defaults (64 and 16): both ends of a
    # connector must slice alike, so both take rank 0's, else the ring and the
    # sends would mix up blocks.
    env = dict(mps, NCCL_SOCKET_IFNAME="lo", ACCL_TIMEOUT="60", LD_LIBRARY_PATH=accl.lib_dir(), NCCL_DEBUG="INFO",
               NCCL_DEBUG_SUBSYS="INIT")
    for var in ("ACCL_NCHANNELS", "ACCL_P2P_NCHANNELS", "NCCL_DEBUG_FILE"):
        env.pop(var, None)
    env["NCCL_CONF_FILE"] = "/dev/null"  # no settings from a file
    rank0 = 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then export ACCL_NCHANNELS=16 ACCL_P2P_NCHANNELS=2; fi; exec "$0" "$@"'
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    for var in ("LD_LIBRARY_PATH", "NCCL_SOCKET_IFNAME", "ACCL_TIMEOUT", "CUDA_MPS_PIPE_DIRECTORY", "NCCL_DEBUG",
                "NCCL_DEBUG_SUBSYS", "NCCL_CONF_FILE"):
        cmd += ["-x", var]
    cmd += ["sh", "-c", rank0, str(drivers / f"{name}_perf"), "-b", "8", "-e", "8M", "-f", "8", "-n", "2", "-w", "1",
            "-c", "1", "-T", "120"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-6000:]
    Table(p.stdout).assert_clean()
    agreed = re.findall(r"(\d+) channel\(s\) per connector, (\d+) per send/recv", p.stdout + p.stderr)
    assert agreed == [("16", "2")] * 2, agreed
