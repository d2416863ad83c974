"""Runs a worker script (rma_device_worker.py, symmetric_worker.py) as one
process per rank: `python WORKER SCENARIO RANK NRANKS UID_HEX`, each printing
"OK" at the end."""
import os
import subprocess
import sys

import rma_device_worker


def run_procs(worker, scenario, nranks, env=None, timeout=60, host_per_rank=False):
    """Every rank's output, once all exited with "OK" (else an assertion
    naming the rank). `env`: the processes' environment (default: this one's);
    host_per_rank: each rank its own NCCL_HOSTID."""
    uid = rma_device_worker.uid_new().hex()
    procs = []
    for r in range(nranks):
        e = dict(os.environ if env is None else env, NCCL_SOCKET_IFNAME="lo")
        if host_per_rank:
            e["NCCL_HOSTID"] = f"worker-host-{r}"
        procs.append(subprocess.Popen([sys.executable, str(worker), scenario, str(r), str(nranks), uid], env=e,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout)[0])
    finally:
        for p in procs:
            p.kill()
    for r, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0 and "OK" in out, f"rank {r}:\n{out[-4000:]}"
    return outs
