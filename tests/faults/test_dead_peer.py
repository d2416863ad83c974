"""No silent hangs: a dead, stopped or absent peer becomes an error that names
it, within seconds for a dead process and within ACCL_TIMEOUT for a stuck one."""
import os
import signal
import socket
import subprocess
import time

import pytest

COUNT = 1 << 20  # floats per allreduce: 4 MiB, many chunks in flight
ERR_BASE = 10    # rank_worker exits with 10 + ncclResult_t
REMOTE_ERROR, TIMEOUT = 6, 8


class Ranks:
    """rank_worker processes with per-rank environment and log files."""

    def __init__(self, exe, nranks, comm_id, tmp_path, env_of_rank=None, iters=100000, extra_env=None, start=True,
                 bound=False, count=COUNT):
        self.exe, self.nranks, self.iters, self.count = exe, nranks, iters, count
        self.env = {**os.environ, "NCCL_COMM_ID": comm_id, **(extra_env or {})}
        self.env_of_rank = env_of_rank
        self.bound = bound  # each rank process on one CPU (its threads too)
        self.logs = [tmp_path / f"rank{r}.log" for r in range(nranks)]
        self.procs = [None] * nranks
        if start:
            for r in range(nranks):
                self.start(r)

    def start(self, r):
        env = {**self.env, **(self.env_of_rank(r) if self.env_of_rank else {})}
        cpus = sorted(os.sched_getaffinity(0))
        bind = (lambda: os.sched_setaffinity(0, {cpus[r % len(cpus)]})) if self.bound else None
        with open(self.logs[r], "w") as f:
            self.procs[r] = subprocess.Popen([str(self.exe), str(r), str(self.nranks), str(self.count), str(self.iters)],
                                             env=env, stdout=f, stderr=subprocess.STDOUT, preexec_fn=bind)

    def log(self, r):
        return self.logs[r].read_text()

    def wait_all_iterating(self, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            if all("iter 2" in self.log(r) for r in range(len(self.procs))):
                return
            time.sleep(0.05)
        pytest.fail("ranks did not start iterating:\n" + "\n".join(self.log(r) for r in range(len(self.procs))))

    def wait(self, r, timeout):
        try:
            return self.procs[r].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"rank {r} still running after {timeout} s (a hang):\n{self.log(r)}")

    def cleanup(self):
        for p in self.procs:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()


@pytest.fixture
def ranks(c_program, comm_id, tmp_path):
    made = []

    def start(nranks, **kw):
        r = Ranks(c_program("rank_worker"), nranks, comm_id, tmp_path, **kw)
        made.append(r)
        return r

    yield start
    for r in made:
        r.cleanup()


def _own_host(r):
    return {"NCCL_HOSTID": f"host{r}"}  # each rank its own "host"


# (environment of a rank, each rank bound to one CPU): bound ranks drive their
# socket connections for whole operations (coll/steps.h), and must still
# learn of a failure that only the connection's proxy reports.
TRANSPORTS = {
    "shm": (None, False),
    "sockets": (_own_host, False),
    "sockets_bound": (_own_host, True),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_killed_rank_fails_the_others_within_seconds(ranks, transport):
    env_of_rank, bound = TRANSPORTS[transport]
    rs = ranks(3, env_of_rank=env_of_rank, bound=bound)
    rs.wait_all_iterating()
    rs.procs[1].kill()
    t0 = time.time()
    for r in (0, 2):
        code = rs.wait(r, timeout=30)
        assert code == ERR_BASE + REMOTE_ERROR, rs.log(r)
        assert "rank 1" in rs.log(r), rs.log(r)  # the failing rank is named
        assert "ncclAllReduce" in rs.log(r)
    assert time.time() - t0 < 10


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stuck_rank_times_out_with_ncclTimeout(ranks, transport):
    env_of_rank, bound = TRANSPORTS[transport]
    rs = ranks(2, env_of_rank=env_of_rank, bound=bound, extra_env={"ACCL_TIMEOUT": "3"})
    rs.wait_all_iterating()
    rs.procs[1].send_signal(signal.SIGSTOP)  # alive but not progressing: only the deadline can tell
    t0 = time.time()
    code = rs.wait(0, timeout=30)
    assert code == ERR_BASE + TIMEOUT, rs.log(0)
    assert "timed out" in rs.log(0)
    assert 2.5 < time.time() - t0 < 15


@pytest.mark.timeout(120)
def test_timeout_bounds_each_wait_not_a_long_operation(ranks):
    # ACCL_TIMEOUT bounds each wait for a peer. One allreduce (1 GiB over
    # sockets) whose peer is stopped for 0.4 s again and again, with 80 ms to
    # run in between, stays stopped longer than ACCL_TIMEOUT in all, and must
    # succeed.
    timeout, stop = 2, 0.4
    rs = ranks(2, env_of_rank=_own_host, extra_env={"ACCL_TIMEOUT": str(timeout)}, iters=2, count=256 << 20)
    end = time.time() + 60
    while not all("calling 1" in rs.log(r) for r in range(2)):  # connected, and both in the second allreduce
        assert time.time() < end and all(p.poll() is None for p in rs.procs), rs.log(0) + rs.log(1)
        time.sleep(0.01)
    stops = 0  # stops that began while rank 0 still waited in the allreduce
    while "iter 1" not in rs.log(0) and rs.procs[0].poll() is None and stops < 60:
        rs.procs[1].send_signal(signal.SIGSTOP)
        stops += 1
        time.sleep(stop)
        rs.procs[1].send_signal(signal.SIGCONT)
        time.sleep(0.08)
    for r in range(2):
        assert rs.wait(r, timeout=60) == 0, rs.log(r)
        assert f"rank {r}: done" in rs.log(r)
    assert stops * stop > timeout + stop, f"only {stops} stops: the allreduce was too short to outlast ACCL_TIMEOUT"


@pytest.mark.timeout(60)
def test_rank_that_never_joins_times_out(ranks):
    rs = ranks(2, extra_env={"ACCL_TIMEOUT": "2"}, iters=1, start=False)
    rs.start(0)  # rank 1 never arrives
    t0 = time.time()
    code = rs.wait(0, timeout=30)
    assert code == ERR_BASE + TIMEOUT, rs.log(0)
    assert time.time() - t0 < 15


@pytest.mark.timeout(60)
def test_stranger_connections_are_dropped(ranks, comm_id):
    host, port = comm_id.split(":")
    rs = ranks(2, iters=3, start=False)
    rs.start(0)  # hosts the root (NCCL_COMM_ID) and waits for rank 1
    # Strangers reach the root first: junk, a hello with the wrong secret, a silent socket.
    strangers = []
    for payload in (b"GET / HTTP/1.0\r\n\r\n", b"\x48\x45\x4c\x4f" + b"\0" * 300, b""):
        for _ in range(200):
            try:
                s = socket.create_connection((host, int(port)), timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        else:
            pytest.fail("the root never listened")
        s.sendall(payload)
        strangers.append(s)
    rs.start(1)
    for r in range(2):
        assert rs.wait(r, timeout=40) == 0, rs.log(r)
        assert "done" in rs.log(r)
    for s in strangers:
        s.close()


@pytest.mark.timeout(60)
def test_ranks_wait_for_a_late_root(ranks):
    # NCCL_COMM_ID: rank 0 hosts the root. Ranks that come first retry their
    # connection with back-off instead of failing.
    rs = ranks(3, iters=2, start=False)
    rs.start(1)
    rs.start(2)
    time.sleep(1.5)
    assert rs.procs[1].poll() is None and rs.procs[2].poll() is None
    rs.start(0)
    for r in range(3):
        assert rs.wait(r, timeout=40) == 0, rs.log(r)
