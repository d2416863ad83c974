"""Ranks of one machine in namespaces of their own, as containers run them:
another PID namespace (its pids name other processes here, or none) and a
private /dev/shm (no shared segments: another host). Needs root (unshare)."""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")

PID_NS = ["-p", "-f", "--mount-proc"]
MOUNT_NS = ["-m"]


def _can(flags, command):
    """Whether unshare with `flags` may run `command` here (a container may forbid it)."""
    p = subprocess.run(["unshare", *flags, "sh", "-c", command], capture_output=True, timeout=30)
    return p.returncode == 0


@pytest.fixture(scope="module")
def pid_ns():
    if not _can(PID_NS, "echo 1000 > /proc/sys/kernel/ns_last_pid"):
        pytest.skip("no PID namespace with a settable ns_last_pid here")


@pytest.fixture(scope="module")
def mount_ns():
    if not _can(MOUNT_NS, "mount -t tmpfs tmpfs /dev/shm"):
        pytest.skip("no mount namespace with a tmpfs of its own here")


def _free_pid():
    """A pid that names no process here (nor the one after it)."""
    used = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    top = int(open("/proc/sys/kernel/pid_max").read())
    for pid in range(top - 1000, top - 2):
        if pid not in used and pid + 1 not in used:
            return pid
    pytest.skip("no free pid near pid_max")


def _start(cmd, log, **kw):
    f = open(log, "w")
    return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, **kw)


def _run_pair(exe, tmp_path, wrap, count, iters, env, pause=None, then="exit $?"):
    """Rank 0 as it is, rank 1 inside `wrap` (unshare's flags, and a shell
    command run first, `then` after it); both run `iters` allreduces of
    `count` floats. `pause(procs)`: called once both ranks iterate. Returns
    both exit codes and logs."""
    logs = [tmp_path / f"rank{r}.log" for r in range(2)]
    args = lambda r: [str(exe), str(r), "2", str(count), str(iters)]
    procs = [_start(args(0), logs[0], env=env),
             _start(["unshare", *wrap[0], "sh", "-c", wrap[1] + f' && "$0" "$@"; {then}', *args(1)], logs[1], env=env)]
    try:
        if pause:
            end = time.time() + 60
            while not all("iter 2" in l.read_text() for l in logs):
                assert time.time() < end and all(p.poll() is None for p in procs), logs[0].read_text() + logs[1].read_text()
                time.sleep(0.01)
            pause(procs)
        codes = [p.wait(timeout=90) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return codes, [l.read_text() for l in logs]


def _rank_worker_pids(rank):
    """{pid: parent pid} of the rank_worker processes of `rank`, as this namespace sees them."""
    found = {}
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
            status = open(f"/proc/{p}/status").read()
        except OSError:
            continue
        if len(argv) > 1 and os.path.basename(argv[0]).startswith(b"rank_worker") and argv[1] == str(rank).encode():
            found[int(p)] = int(re.search(r"PPid:\s+(\d+)", status).group(1))
    return found


def _stop_a_while(procs):
    os.killpg(procs[1].pid, signal.SIGSTOP)  # unshare, its shell and rank 1
    time.sleep(0.5)  # five times ACCL_PEER_CHECK_MS: rank 0 waits, and checks its peer's pid
    running = procs[0].poll() is None
    os.killpg(procs[1].pid, signal.SIGCONT)
    assert running, "rank 0 stopped (finished or failed) while rank 1 was stopped"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("count,iters", [(1 << 20, 200), (1000, 50000)], ids=["ring", "inline"])
def test_rank_in_another_pid_namespace(pid_ns, c_program, comm_id, tmp_path, count, iters):
    # Rank 1's pid (in its own namespace) names no process here: a waiting
    # rank must not read that as "the peer died" (nor attach to that pid), and
    # the calls still run on the shared /dev/shm (the ring or inline).
    pid = _free_pid()
    env = {**os.environ, "NCCL_COMM_ID": comm_id, "ACCL_PEER_CHECK_MS": "100", "NCCL_DEBUG": "INFO",
           "NCCL_DEBUG_SUBSYS": "INIT"}
    wrap = (PID_NS, f"echo {pid} > /proc/sys/kernel/ns_last_pid")
    codes, logs = _run_pair(c_program("rank_worker"), tmp_path, wrap, count, iters, env, pause=_stop_a_while)
    assert codes == [0, 0], logs[0] + logs[1]
    assert "died" not in logs[0]
    assert "rank 1 is in another PID namespace than rank 0" in logs[0], logs[0]
    assert "shm/shm)" in logs[0], logs[0]  # one host still: the ring on shared memory


@pytest.mark.timeout(120)
def test_rank_with_a_private_dev_shm_is_another_host(mount_ns, c_program, comm_id, tmp_path):
    # No segment of rank 0's /dev/shm reaches rank 1: they talk over sockets.
    env = {**os.environ, "NCCL_COMM_ID": comm_id, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT"}
    wrap = (MOUNT_NS, "mount -t tmpfs tmpfs /dev/shm")
    codes, logs = _run_pair(c_program("rank_worker"), tmp_path, wrap, 1 << 16, 5, env)
    assert codes == [0, 0], logs[0] + logs[1]
    # The ring's connections (the "ready" line): the network, its backend and NIC.
    assert re.search(r"net \(Socket \S+\)/net \(Socket \S+\)\)", logs[0]), logs[0]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("count", [1 << 20, 1000], ids=["ring", "inline"])
def test_killed_rank_in_another_pid_namespace_is_found(pid_ns, c_program, comm_id, tmp_path, count):
    # No pid to check: the record lock rank 1 holds on a file in /dev/shm
    # (transport/peer_life.h) goes when it dies, and rank 0 fails within seconds
    # (not at ACCL_TIMEOUT), naming it, waiting on the ring's shm connection or
    # in an inline direct call (which has no connection; it waited out
    # ACCL_TIMEOUT before the locks).
    pid = _free_pid()
    env = {**os.environ, "NCCL_COMM_ID": comm_id, "ACCL_TIMEOUT": "60", "NCCL_DEBUG": "WARN"}
    wrap = (PID_NS, f"echo {pid} > /proc/sys/kernel/ns_last_pid")
    t0 = []

    def kill(procs):
        os.killpg(procs[1].pid, signal.SIGKILL)
        t0.append(time.time())

    codes, logs = _run_pair(c_program("rank_worker"), tmp_path, wrap, count, 10 ** 7, env, pause=kill)
    assert codes[0] == 10 + 6, logs[0]  # ncclRemoteError
    assert time.time() - t0[0] < 15, logs[0]
    assert "rank 1" in logs[0] and "(in another PID namespace) is gone" in logs[0], logs[0]


@pytest.mark.timeout(120)
def test_killed_rank_whose_forked_child_lives_is_found(pid_ns, c_program, comm_id, tmp_path):
    # Rank 1 forked a child after init that holds every descriptor it had
    # (sockets, shm): only rank 1 is killed, its namespace and child live on.
    # The child does not hold rank 1's record lock, so rank 0 still fails
    # within seconds (a kept socket would have stayed open in the child).
    pid = _free_pid()
    env = {**os.environ, "NCCL_COMM_ID": comm_id, "ACCL_TIMEOUT": "60", "NCCL_DEBUG": "WARN",
           "RANK_WORKER_FORK_CHILD": "1"}
    wrap = (PID_NS, f"echo {pid} > /proc/sys/kernel/ns_last_pid")
    took = []

    def kill_the_parent(procs):
        pids = _rank_worker_pids(1)
        parents = [p for p, pp in pids.items() if pp not in pids]
        assert len(pids) == 2 and len(parents) == 1, pids
        os.kill(parents[0], signal.SIGKILL)
        t0 = time.time()
        try:
            procs[0].wait(timeout=20)  # the child and the namespace's shell live 30 s more
        except subprocess.TimeoutExpired:
            pass
        took.append(time.time() - t0)
        os.killpg(procs[1].pid, signal.SIGKILL)

    codes, logs = _run_pair(c_program("rank_worker"), tmp_path, wrap, 1 << 20, 10 ** 7, env, pause=kill_the_parent,
                            then="sleep 30")
    assert codes[0] == 10 + 6, logs[0]  # ncclRemoteError
    assert took[0] < 15, logs[0]
    assert "rank 1" in logs[0] and "(in another PID namespace) is gone" in logs[0], logs[0]
