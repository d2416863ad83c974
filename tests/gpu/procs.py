"""Runs a worker script (rma_device_worker.py, symmetric_worker.py) as one
process per rank: `python WORKER SCENARIO RANK NRANKS UID_HEX`, each printing
"OK" at the end; and a perf driver under mpirun, one process per rank."""
import os
import re
import subprocess
import sys

from nccl_table import Table

import accl

# Each rank of several processes on one GPU says at destroy how its calls ran.
RAN = re.compile(r"(\d+) collective\(s\) ran direct, (\d+) on the ring")


def ran(out):
    """(direct, ring) from a rank's INFO line at destroy."""
    m = RAN.search(out)
    assert m, out[-3000:]
    return int(m.group(1)), int(m.group(2))


def mpirun_driver(driver, nprocs, args, mps, timeout=500, **extra):
    """`mpirun -np nprocs DRIVER ARGS` on ACCL under the MPS daemon of `mps`
    (the fixture's environment), with the variables `extra` on every rank
    (INFO of subsystem COLL unless they say otherwise); checks the exit status
    and the table, and returns the ranks' log (stderr)."""
    env = {**mps, "NCCL_SOCKET_IFNAME": "lo", "ACCL_TIMEOUT": "60", "LD_LIBRARY_PATH": accl.lib_dir(),
           "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "COLL", **extra}
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(nprocs)]
    for var in {"LD_LIBRARY_PATH", "NCCL_SOCKET_IFNAME", "ACCL_TIMEOUT", "CUDA_MPS_PIPE_DIRECTORY", "NCCL_DEBUG",
                "NCCL_DEBUG_SUBSYS", *extra}:
        cmd += ["-x", var]
    p = subprocess.run(cmd + [str(driver)] + args, capture_output=True, text=True, timeout=timeout, env=env)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-6000:]
    Table(p.stdout).assert_clean()
    return p.stderr


def run_driver(driver, nprocs, args, mps, timeout=500, **extra):
    """mpirun_driver, then every rank's (direct, ring) count."""
    log = mpirun_driver(driver, nprocs, args, mps, timeout, **extra)
    return [(int(d), int(r)) for d, r in RAN.findall(log)]


def run_procs(worker, scenario, nranks, env=None, timeout=60, host_per_rank=False):
    """Every rank's output, once all exited with "OK" (else an assertion
    naming the rank). `env`: the processes' environment (default: this one's);
    host_per_rank: each rank its own NCCL_HOSTID."""
    import rma_device_worker  # CuPy: only the workers' tests need it

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
