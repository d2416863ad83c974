"""The library through its C ABI, from C programs built as a user would build them."""
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest


def run(exe, *args, env=None, timeout=180):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=timeout, env=e)


def host_direct_ok(c_program, mode, nranks, **env):
    """tests/c/host_direct.c MODE N, which must pass on every rank ("OK: N
    ranks"); the process, whose stderr holds the WARN lines."""
    p = run(c_program("host_direct"), mode, nranks, env={"NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "WARN", **env},
            timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr[-4000:]
    assert f"OK: {nranks} ranks" in p.stdout
    return p


def test_bad_arguments_give_errors_and_warnings(c_program):
    p = run(c_program("bad_args"), env={"NCCL_DEBUG": "WARN"})
    print(p.stdout)
    assert p.returncode == 0, p.stdout + p.stderr
    m = re.search(r"(\d+) passed, (\d+) failed", p.stdout)
    assert m and int(m.group(1)) >= 40 and m.group(2) == "0"
    warns = [l for l in p.stderr.splitlines() if " NCCL WARN " in l]
    assert len(warns) >= 35
    # NCCL's format: host:pid:tid [dev] file:line NCCL WARN message
    assert all(re.match(r"^\S+:\d+:\d+ \[\d+\] \S+\.cc:\d+ NCCL WARN \S", l) for l in warns), warns[:3]


def test_parameter_api(c_program, tmp_path):
    """tests/c/params.c: NCCL 2.30's parameter API against the environment
    and conf file set here; then ncclParamDumpAll's lines on stdout."""
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_ALGO=ring\n# a comment\nACCL_TIMEOUT = 77\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("NCCL_SOCKET_FAMILY", "ACCL_DIRECT_MIN_BYTES", "NCCL_ALGO", "ACCL_TIMEOUT")}
    env.update(NCCL_BUFFSIZE="2M", NCCL_HOSTID="hostA", ACCL_STAGE_CHUNK_BYTES="-1", ACCL_PEER_CHECK_MS="abc",
               NCCL_CONF_FILE=str(conf), ACCL_SECRET="topsecret", ACCL_MODE="host", NCCL_DEBUG="WARN")
    p = subprocess.run([str(c_program("params"))], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0 and p.stdout.endswith("OK\n"), p.stdout + p.stderr
    dump = p.stdout.splitlines()
    assert "NCCL_BUFFSIZE=2M (env)" in "\n".join(dump)
    assert any(l.startswith(f"ACCL_TIMEOUT=77 ({conf})") for l in dump), dump
    assert any(l.startswith("ACCL_PEER_CHECK_MS=100 (env (invalid, default used))") for l in dump), dump
    assert any(l.startswith("ACCL_SECRET=(hidden) (env)") for l in dump), dump
    assert "topsecret" not in p.stdout + p.stderr


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
@pytest.mark.parametrize("count", [0, 1, 7, 1000003])
def test_c_consumer_allreduce(c_program, nranks, count):
    p = run(c_program("allreduce_c"), nranks, count)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"OK: {nranks} ranks" in p.stdout


def test_c_consumer_large_256mib(c_program):
    # 64 Mi elements: 256 MiB per buffer, two ranks.
    p = run(c_program("allreduce_c"), 2, 64 << 20, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", ["sockets", "shm"])
def test_sockets_send_from_the_callers_buffers(c_program, transport):
    """tests/c/sent_from_memory.c: 2 processes, a host each (or one host);
    allreduce and send/receive sent from the inputs themselves, exact
    results in and out of place (a send and a receive of one group on one
    buffer too), inputs overwritten right after each call; then a call that
    times out with frames queued from its input, which is then unmapped."""
    p = run(c_program("sent_from_memory"), transport, env={"NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "WARN"},
            timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr[-4000:]
    assert "OK: rank 0" in p.stdout and "OK: rank 1" in p.stdout, p.stdout


@pytest.mark.timeout(120)
def test_ring_sends_from_the_callers_buffers(c_program):
    """tests/c/ring_sent_from_memory.c: 3 processes, a host each, the ring
    (NCCL_ALGO=ring): allreduce, allgather and broadcast in and out of place
    with exact results, every buffer overwritten right after its call, so a
    chunk still going out from it would show in the results."""
    p = run(c_program("ring_sent_from_memory"), env={"NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "WARN"}, timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr[-4000:]
    assert all(f"OK: rank {r}" in p.stdout for r in range(3)), p.stdout


def test_c_consumer_sockets(c_program):
    p = run(c_program("allreduce_c"), 3, 1000003, env={"NCCL_SHM_DISABLE": "1"})
    assert p.returncode == 0, p.stdout + p.stderr


def test_several_ranks_in_one_process(c_program):
    p = run(c_program("init_all"))
    print(p.stdout)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"\d+ passed, 0 failed", p.stdout)


@pytest.mark.parametrize("mode,arg,env", [
    ("allreduce", 1024, {}),                          # inline through shared memory
    ("allreduce", 1 << 20, {}),                       # the direct collective
    ("allreduce", 1 << 20, {"ACCL_DIRECT": "0"}),     # the ring's connections
    ("send", 1 << 20, {}),                            # a straight send waits for its receive
])
def test_one_thread_driving_two_ranks_ungrouped_fails_at_once(c_program, mode, arg, env):
    # NCCL deadlocks here; ACCL knows no other thread could call rank 1.
    p = run(c_program("one_thread_ungrouped"), mode, arg, env={"NCCL_DEBUG": "WARN", **env}, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    seconds = float(re.search(r"after ([\d.]+) s", p.stdout).group(1))
    assert seconds < 2, p.stdout
    assert "ncclGroupStart/ncclGroupEnd" in p.stderr and "rank 1" in p.stderr, p.stderr[-3000:]


def test_one_thread_ungrouped_send_that_fits_still_works(c_program):
    # Once the connection exists (a grouped exchange made it), a send the
    # FIFO holds does not wait for its receive: no error, and the receive
    # after it gets the data. Without the connection it fails at once (the
    # set-up needs both ranks): the `send` case above with 4 KiB.
    p = run(c_program("one_thread_ungrouped"), "send_connected", 4096, timeout=60)
    assert p.returncode == 0 and "the receive got it" in p.stdout, p.stdout + p.stderr[-3000:]
    p = run(c_program("one_thread_ungrouped"), "send", 4096, timeout=60)
    assert p.returncode == 0 and re.search(r"invalid usage.* after 0\.\d+ s", p.stdout), p.stdout + p.stderr[-3000:]


def test_ranks_of_one_process_grouped_or_on_two_threads_are_not_refused(c_program):
    p = run(c_program("one_thread_ungrouped"), "grouped", timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    # Rank 1's thread comes a second late, while rank 0 waits: within ACCL_SELF_WAIT_MS (5 s).
    p = run(c_program("one_thread_ungrouped"), "two_threads", 1000, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert "WARN" not in p.stderr, p.stderr[-3000:]


def test_a_second_thread_later_than_self_wait_ms_is_refused_with_the_parameter_named(c_program):
    p = run(c_program("one_thread_ungrouped"), "two_threads", 3000, env={"ACCL_SELF_WAIT_MS": "300"}, timeout=60)
    assert p.returncode == 1, p.stdout + p.stderr[-3000:]
    assert "ACCL_SELF_WAIT_MS" in p.stderr and "ncclGroupStart/ncclGroupEnd" in p.stderr, p.stderr[-3000:]


def test_an_abort_frame_waits_for_the_messages_sent_before_it(c_program):
    # Across hosts the control line is not the data's stream: rank 0's abort
    # frame may come while its last messages still wait in the backend.
    p = run(c_program("net_abort_after_send"), env={"NCCL_DEBUG": "WARN"}, timeout=60)
    assert p.returncode == 0 and "OK" in p.stdout, p.stdout + p.stderr[-3000:]


def _unused_uid():
    """A uid no process runs as: RLIMIT_NPROC counts every thread of the user."""
    used = set()
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            used.add(int(re.search(r"^Uid:\s+(\d+)", open(f"/proc/{p}/status").read(), re.M).group(1)))
        except (OSError, AttributeError):
            pass
    return next(u for u in [65534, *range(61000, 62000)] if u not in used)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to switch users")
def test_thread_limit_gives_errors_not_crashes(c_program, accl_paths):
    """tests/c/thread_limit.c as a user no other process runs as (root's
    thread limit does not bind), which lowers its RLIMIT_NPROC once 4 ranks
    are up: grouped calls reuse the pool's idle threads; a group that needs
    more fails with ncclSystemError before any of it runs (it crashed: part of
    it had been queued on a stack frame the exception unwound); a non-blocking
    init whose thread cannot start fails through its async error. The binary
    and the library go to a directory that user reads."""
    uid = _unused_uid()
    user = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    if subprocess.run(user + ["true"], capture_output=True).returncode != 0:
        pytest.skip(f"setpriv cannot switch to uid {uid} here")
    d = Path(tempfile.mkdtemp(prefix="accl-uid-", dir="/tmp"))
    try:
        d.chmod(0o755)
        shutil.copy(c_program("thread_limit"), d / "thread_limit")
        shutil.copy(accl_paths[0], d / "libnccl.so.2")
        p = subprocess.run(user + [str(d / "thread_limit")],
                           capture_output=True, text=True, timeout=120, cwd=d,
                           env={**os.environ, "LD_LIBRARY_PATH": str(d), "NCCL_DEBUG": "WARN", "ACCL_MODE": "host"})
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print(p.stdout)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert re.search(r"\d+ passed, 0 failed", p.stdout)
    assert "cannot start a thread for 8 jobs that must run at once (none of them ran)" in p.stderr, p.stderr


def test_shrink_and_revoke(c_program):
    # 4 ranks as threads: shrink without a rank that does not call, revoke stops
    # a waiting allreduce and refuses new ones, shrink with NCCL_SHRINK_ABORT rebuilds.
    p = run(c_program("shrink_revoke"))
    assert p.returncode == 0 and p.stdout.strip().endswith("OK"), p.stdout + p.stderr
    assert "the communicator was revoked" in p.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("secret", ["", "s3cret"])
def test_split_and_shrink_under_nccl_comm_id(c_program, comm_id, secret):
    # 4 processes rendezvous through NCCL_COMM_ID, split by parity and shrink
    # without rank 3: each new communicator gets an id of its own (NCCL_COMM_ID's
    # one fixed address would mix the colours), and sums its own ranks only.
    env = {"NCCL_COMM_ID": comm_id, "ACCL_SECRET": secret, "NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "WARN",
           "ACCL_TIMEOUT": "30"}
    p = run(c_program("commid_split"), env=env, timeout=100)
    assert p.returncode == 0 and p.stdout.strip().endswith("OK"), p.stdout + p.stderr[-4000:]
    # Without ACCL_SECRET anyone who knows the address can derive the secret: the process that
    # made the id (rank 0; the others got it through a pipe) says so once.
    assert p.stderr.count("without ACCL_SECRET") == (1 if not secret else 0), p.stderr[-4000:]


@pytest.mark.timeout(60)
def test_a_failed_nccl_comm_id_init_frees_the_address(c_program, comm_id):
    # rank 0's root on NCCL_COMM_ID's address stops when rank 0's init ends
    # without its peers, so that a retry can listen there at once (ACCL_TIMEOUT
    # is long: before, the root held the port that long)
    env = {"NCCL_COMM_ID": comm_id, "ACCL_SECRET": "s3cret", "NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "WARN",
           "ACCL_TIMEOUT": "120"}
    p = run(c_program("commid_retry"), env=env, timeout=50)
    assert p.returncode == 0 and p.stdout.strip().endswith("OK"), p.stdout + p.stderr[-4000:]


@pytest.mark.timeout(60)
def test_a_failed_call_fails_its_group(c_program):
    # Inside a group a bad allreduce, or an init with a bad config, fails the
    # outermost ncclGroupEnd, which runs nothing queued (no output changes, no
    # init waits for a rank that never comes); the thread's next group runs.
    p = run(c_program("group_error"), env={"NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "WARN"}, timeout=50)
    assert p.returncode == 0 and p.stdout.strip().endswith("OK"), p.stdout + p.stderr
    assert p.stderr.count("ncclGroupEnd: a call inside the group failed (error 4") == 2, p.stderr
    assert "1 call(s) queued on it in this thread's open group are dropped" in p.stderr, p.stderr


def test_grow_suspend_resume_and_memory_statistics(c_program):
    # 2 ranks grow to 4 (threads); a suspended communicator refuses work until resumed.
    p = run(c_program("grow_suspend"))
    assert p.returncode == 0 and p.stdout.strip().endswith("OK"), p.stdout + p.stderr


def test_debug_file_and_info_format(c_program, tmp_path, comm_id):
    exe = c_program("rank_worker")
    pattern = str(tmp_path / "log.%h.%p")
    env = {"NCCL_COMM_ID": comm_id, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": pattern}
    procs = [subprocess.Popen([str(exe), str(r), "2", "1000", "2"], env={**os.environ, **env},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    for p in procs:
        p.wait(timeout=60)
        assert p.returncode == 0, p.stdout.read() + p.stderr.read()
    logs = sorted(tmp_path.glob("log.*"))
    assert len(logs) == 2
    pids = {str(p.pid) for p in procs}
    assert {l.name.rsplit(".", 1)[1] for l in logs} == pids
    text = logs[0].read_text()
    assert re.search(r"^\S+:\d+:\d+ \[\d+\] NCCL INFO ", text, re.M), text


def test_unknown_interface_is_a_clear_error(c_program, comm_id):
    exe = c_program("rank_worker")
    env = {**os.environ, "NCCL_COMM_ID": comm_id, "NCCL_SOCKET_IFNAME": "=nosuchif0"}
    p = subprocess.run([str(exe), "0", "1", "10", "1"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "NCCL_SOCKET_IFNAME==nosuchif0 matches no usable interface" in p.stdout + p.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a private mount namespace")
def test_small_dev_shm_is_reported_as_such(c_program):
    # A 256 KiB /dev/shm in a private mount namespace: far less than one FIFO needs.
    exe = c_program("allreduce_c")
    script = f"mount -t tmpfs -o size=256k tmpfs /dev/shm && exec {exe} 2 1000"
    p = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=60)
    if "mount" in p.stderr and "permission" in p.stderr.lower():
        pytest.skip("mount namespaces are not permitted here")
    assert p.returncode != 0
    assert "/dev/shm is too small" in p.stderr, p.stderr
    assert "NCCL_SHM_DISABLE=1" in p.stderr  # and says what to do


def test_ipv6_bootstrap(c_program):
    # The unique id's root and every connection on ::1.
    p = run(c_program("allreduce_c"), 3, 10007, env={"NCCL_SOCKET_FAMILY": "AF_INET6", "NCCL_SHM_DISABLE": "1"})
    assert p.returncode == 0, p.stdout + p.stderr


def test_bad_socket_family_is_a_clear_error(c_program):
    p = run(c_program("allreduce_c"), 1, 10, env={"NCCL_SOCKET_FAMILY": "AF_UNIX"})
    assert p.returncode != 0
    assert "NCCL_SOCKET_FAMILY=AF_UNIX is not AF_INET or AF_INET6" in p.stderr + p.stdout


def _all_ranks_pass(p, nranks):
    lines = [l for l in p.stdout.splitlines() if re.match(r"rank \d+: \d+ passed, \d+ failed", l)]
    return p.returncode == 0 and len(lines) == nranks and all(l.endswith(" 0 failed") for l in lines)


@pytest.mark.parametrize("nranks", [1, 2, 3, 4, 5])
def test_every_collective_from_c(c_program, nranks):
    p = run(c_program("collectives"), nranks, 1001)
    assert _all_ranks_pass(p, nranks), p.stdout + p.stderr[-3000:]


# One FIFO slot is NCCL_BUFFSIZE/8 = 128 KiB = 32768 int32: around it, and many slots.
@pytest.mark.parametrize("count", [0, 1, 32767, 32768, 32769, 400001])
# 400001 int32 run direct on one host (design.md), unless ACCL_DIRECT=0 keeps them on the ring or tree.
@pytest.mark.parametrize("env", [{}, {"ACCL_DIRECT": "0"}, {"NCCL_SHM_DISABLE": "1"},
                                 {"NCCL_ALGO": "allreduce:tree", "ACCL_DIRECT": "0"},
                                 {"NCCL_BUFFSIZE": "32768", "ACCL_DIRECT": "0"}],
                         ids=["shm", "shm-ring", "sockets", "tree", "small-fifo"])
def test_every_collective_from_c_sizes(c_program, count, env):
    p = run(c_program("collectives"), 3, count, env=env)
    assert _all_ranks_pass(p, 3), p.stdout + p.stderr[-3000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("env,said", [
    ({"NCCL_BUFFSIZE": "99999999999999"}, "NCCL_BUFFSIZE=99999999999999 (env) is outside [32768, 268435456]"),
    ({"ACCL_CHUNKSIZE": "99999999999999"}, "ACCL_CHUNKSIZE=99999999999999 (env) is outside [0, 33554432]"),
    ({"NCCL_CONF_FILE": "/dev/zero"}, "/dev/zero is not a regular file: ignored as a configuration file"),
], ids=["buffsize", "chunksize", "conf-dev-zero"])
def test_parameters_out_of_range_take_the_default(c_program, env, said):
    # Each allocated until the machine ran short (FIFOs sized by the value) or
    # hung the init (a configuration file that never ends): now the default,
    # and every rank's first init says so; 3 ranks' collectives stay exact.
    p = run(c_program("collectives"), 3, 4099, env={**env, "NCCL_DEBUG": "WARN"}, timeout=100)
    assert _all_ranks_pass(p, 3), p.stdout + p.stderr[-3000:]
    assert p.stderr.count(said) >= 3, p.stderr[-3000:]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("nranks,hosts,algo,hier", [(4, 2, "", True), (6, 3, "allreduce:hier", True),
                                                    (6, 2, "hier,ring", True), (6, -2, "hier,ring", True),
                                                    (4, 2, "ring,tree", False), (5, 2, "hier,ring", False)],
                         ids=["2x2", "3x2-allreduce", "2x3", "2x3-interleaved", "2x2-ring", "uneven"])
def test_every_collective_across_hosts_of_several_ranks(c_program, nranks, hosts, algo, hier):
    # Hosts of as many ranks each take the hierarchical allreduce, allgather
    # and reducescatter where NCCL_ALGO allows them (every op, PreMulSum and
    # average included, 4099 elements leaving a remainder; ranks numbered
    # host by host or interleaved); uneven hosts, or ring, the flat ring.
    env = {"TEST_HOSTS": str(hosts), "NCCL_ALGO": algo, "NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "INFO",
           "NCCL_DEBUG_SUBSYS": "COLL"}
    p = run(c_program("collectives"), nranks, 4099, env=env, timeout=150)
    assert _all_ranks_pass(p, nranks), p.stdout[-3000:] + p.stderr[-3000:]
    said = p.stdout.count("hierarchical collectives: place") + p.stderr.count("hierarchical collectives: place")
    assert (said >= nranks) if hier else said == 0, p.stderr[-3000:]


@pytest.mark.parametrize("env,slot", [({}, 524288), ({"NCCL_BUFFSIZE": "1048576"}, 131072),
                                      ({"ACCL_CHUNKSIZE": "65536"}, 65536), ({"TEST_HOSTS": "1"}, 131072)],
                         ids=["default", "buffsize", "chunksize", "one-host"])
def test_fifo_slots_between_hosts(c_program, env, slot):
    # Host buffers between hosts take NCCL's 4 MiB per connection (512 KiB
    # slots) unless NCCL_BUFFSIZE or ACCL_CHUNKSIZE says otherwise; one host 1 MiB.
    env = {"TEST_HOSTS": "2", "NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT", **env}
    p = run(c_program("collectives"), 2, 4099, env=env, timeout=100)
    assert _all_ranks_pass(p, 2), p.stdout[-3000:] + p.stderr[-3000:]
    assert f"FIFO slots of {slot} bytes" in p.stderr, p.stderr[-3000:]


def test_unknown_nccl_algo_token_fails_init(c_program):
    p = run(c_program("allreduce_c"), 2, 10, env={"NCCL_ALGO": "ring,warp"})
    assert p.returncode != 0
    assert "NCCL_ALGO: unknown token 'warp'" in p.stderr


def test_nccl_algo_leaving_no_algorithm_is_invalid_usage(c_program):
    # As NCCL: NCCL_ALGO=tree leaves broadcast without an algorithm.
    p = run(c_program("collectives"), 2, 10, env={"NCCL_ALGO": "tree"})
    assert p.returncode != 0
    assert "no algorithm available for Broadcast: the ranks' NCCL_ALGO (here 'tree')" in p.stdout + p.stderr


@pytest.mark.timeout(180)
def test_sixteen_ranks_on_two_cores(c_program):
    # 16 processes on this 2-core machine: every collective, smaller FIFOs (256 KiB per connection).
    p = run(c_program("collectives"), 16, 4099, env={"NCCL_BUFFSIZE": "262144", "NCCL_ALGO": "allreduce:tree,ring"},
            timeout=150)
    assert _all_ranks_pass(p, 16), p.stdout[-3000:] + p.stderr[-3000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode,nranks,hosts", [("threads", 2, False), ("threads", 4, False), ("procs", 3, False),
                                               ("procs", 3, True)],
                         ids=["threads2", "threads4", "procs3_shm", "procs3_sockets"])
def test_windows_and_one_sided_operations(c_program, mode, nranks, hosts):
    # Puts into every rank's window, a multi-slot put, bare signals, bad
    # arguments, collective deregistration, and a wait that must time out
    # (ACCL_TIMEOUT=2); every byte checked by the program.
    env = {"ACCL_TIMEOUT": "2", "NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "WARN"}
    if hosts:
        env["RMA_HOST_PER_RANK"] = "1"  # each process its own NCCL_HOSTID: the puts cross sockets
    p = run(c_program("rma"), mode, nranks, env=env, timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr[-4000:]
    assert f"OK: {nranks} ranks" in p.stdout
    timeouts = p.stderr.count("timed out (ACCL_TIMEOUT) waiting for 1 signal(s)")
    assert 1 <= timeouts <= nranks, p.stderr[-4000:]  # the others may learn of a peer's timeout first
    assert "peer -1 is outside" in p.stderr and "inside ncclGroupStart/ncclGroupEnd" in p.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nranks", [2, 4])
def test_windows_registered_inside_a_group(c_program, nranks):
    # One thread registers (and deregisters) windows for every rank inside a
    # group: ncclGroupEnd runs them and sets the handles, in call order per rank.
    p = run(c_program("rma_group"), nranks, env={"NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "WARN"}, timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr[-4000:]
    assert f"OK: {nranks} ranks" in p.stdout
    assert "one-sided operations inside ncclGroupStart/ncclGroupEnd" in p.stderr
    assert p.stderr.count("was already deregistered") == nranks, p.stderr[-4000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nranks", [2, 3])
def test_differing_window_calls_fail_at_once(c_program, nranks):
    # Rank 0 registers a window while the others deregister one: their
    # exchanges differ in size, and every rank's call must fail within seconds
    # (ACCL_TIMEOUT is 60), the ones that saw it saying why.
    p = run(c_program("rma"), "differ", nranks, env=rma_env(False), timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr[-4000:]
    assert f"OK: {nranks} ranks" in p.stdout
    assert "at the same time (every rank must register and deregister windows in the same order)" in p.stderr


def rma_env(hosts):
    """tests/c/rma.c's environment: ACCL_TIMEOUT 60, loopback; with `hosts`
    each process its own NCCL_HOSTID, so that the puts cross sockets."""
    env = {"ACCL_TIMEOUT": "60", "NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "WARN"}
    if hosts:
        env["RMA_HOST_PER_RANK"] = "1"
    return env


@pytest.mark.timeout(120)
@pytest.mark.parametrize("hosts", [False, True], ids=["shm", "sockets"])
def test_wait_signal_sees_a_dead_peer_at_once(c_program, hosts):
    # Ranks 1 and 2 register a window and exit; rank 0's ncclWaitSignal must end
    # with ncclRemoteError naming a dead rank within seconds, not at ACCL_TIMEOUT (60).
    p = run(c_program("rma"), "dead", 3, env=rma_env(hosts), timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr[-4000:]
    assert "OK: dead peer seen after" in p.stdout
    assert re.search(r"rank [12] \(pid \d+ on \S+\) left \(destroyed its communicator, or its process ended\) "
                     r"still owing this rank 1 one-sided message", p.stderr), p.stderr[-4000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("hosts", [False, True], ids=["shm", "sockets"])
def test_wait_signal_outlives_a_peer_that_left_owing_nothing(c_program, hosts):
    # Rank 1 signals rank 0, destroys its communicator and exits; ranks 2 (and 3)
    # signal half a second later: rank 0's wait for one signal from each succeeds.
    for nranks in (3, 4):
        p = run(c_program("rma"), "left", nranks, env=rma_env(hosts), timeout=50)
        assert p.returncode == 0, p.stdout + p.stderr[-4000:]
        assert f"OK: {nranks} ranks" in p.stdout
        assert " WARN " not in p.stderr, p.stderr[-4000:]


# host_direct's modes (tests/c/host_direct.c): what init says about the
# direct collectives, what each window's registration says, and how each
# rank's first direct call reaches the other ranks' buffers.
DIRECT_MODES = {
    "threads": ("on any buffer", "direct", "process"),
    "procs": ("on any buffer", "direct", "windows"),
    "private": ("on any buffer", "unmapped", "attach"),
    "plain": ("on any buffer", None, "attach"),
    "plainthreads": ("on any buffer", None, "process"),
    "forked": ("on any buffer", None, "attach"),
    "bounds": ("on any buffer", None, "attach"),
    "payloads": ("on any buffer", None, "attach"),
    "mixed": ("on any buffer", "direct", "mixed"),
    "nocma": ("only on symmetric windows: rank 1 runs with ACCL_CMA=0", "direct", "windows"),
    "nodirect": ("no direct collectives: rank 1 runs with ACCL_DIRECT=0", None, None),
}


@pytest.mark.timeout(150)
@pytest.mark.parametrize("mode,nranks", [("threads", 2), ("threads", 3), ("procs", 2), ("procs", 3), ("procs", 4),
                                         ("private", 3), ("plain", 2), ("plain", 4), ("plainthreads", 3),
                                         ("forked", 2), ("bounds", 3), ("payloads", 3), ("mixed", 3), ("nocma", 3), ("nodirect", 3)])
def test_direct_collectives_in_host_mode(c_program, mode, nranks):
    # Every collective, in place and not, sum/max/prod/avg and a PreMulSum
    # whose scalar differs by rank, checked element by element; in windows
    # registered with NCCL_WIN_COLL_SYMMETRIC (coll/host_direct.h), or on plain
    # buffers; then, with windows, the same buffers after deregistration.
    # The INFO lines say which way each rank reached the others' buffers.
    env = {"NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,COLL", "ACCL_TIMEOUT": "60"}
    p = run(c_program("host_direct"), mode, nranks, env=env, timeout=140)  # 1.2 MB calls: direct by default
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-4000:]
    assert f"OK: {nranks} ranks" in p.stdout
    init, window, reach = DIRECT_MODES[mode]
    # The slots' segment: per rank two lines of counters and 8 descriptions,
    # then 8 payloads of rank 0's inline bound (8 KiB by default).
    payload = 1024 if mode == "payloads" else 8192
    slots = -(-nranks * (128 + 64 * 8 + 8 * payload) // 4096) * 4096 if reach else 0
    assert f"rank 0 maps {slots} bytes of slots" in p.stdout, p.stdout[-3000:]
    assert len(re.findall(r": (no )?direct collectives( on any| only|:)", p.stderr)) == 1, p.stderr[-4000:]
    assert init in p.stderr, p.stderr[-4000:]
    direct = len(re.findall(r"window #[01]: direct collectives", p.stderr))
    unmapped = len(re.findall(r"window #[01]: rank \d cannot map rank 1's part .*: collectives on it reach its "
                              r"buffers as they do any others", p.stderr))
    want = {"direct": (2 * nranks, 0), "unmapped": (0, 2 * nranks), None: (0, 0)}[window]
    assert (direct, unmapped) == want, p.stderr[-4000:]
    first = {int(m[0]): tuple(map(int, m[1:])) for m in re.findall(
        r"rank (\d+): ncclAllReduce runs direct \(first such call\); other ranks' buffers: (\d+) in windows mapped "
        r"here, (\d+) through cross memory attach, (\d+) in this process", p.stderr)}
    others = 2 * (nranks - 1)  # every other rank's input and output
    inline = len(re.findall(r"rank \d+: \w+ runs inline \(first such call\)", p.stderr))
    # The small calls run inline, unless a rank's ACCL_DIRECT_INLINE_BYTES=0 ("bounds") holds for all.
    assert inline == (0 if reach is None or mode == "bounds" else nranks), p.stderr[-4000:]
    if reach is None:
        assert first == {}, p.stderr[-4000:]
        return
    for r in range(nranks):
        want = {"process": (0, 0, others), "windows": (others, 0, 0), "attach": (0, others, 0),
                "mixed": (others, 0, 0) if r == 1 else (others - 2, 2, 0)}[reach]
        assert first.get(r) == want, (r, p.stderr[-4000:])


@pytest.mark.timeout(120)
def test_failed_direct_call_leaves_the_output_alone(c_program):
    # Rank 1 times out (ACCL_TIMEOUT=1) waiting for rank 0, which calls a
    # 4 MB allreduce 3 s late: rank 0 must see rank 1 stopped and fail, not
    # write rank 1's output, which rank 1's caller owns again.
    p = run(c_program("host_direct"), "late", 2, env={"NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "WARN"},
            timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr[-4000:]
    assert "OK: the late rank left the output alone" in p.stdout
    assert "rank 1 stopped" in p.stderr, p.stderr[-3000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["mismatch", "dtype", "smallmismatch", "tinymismatch"])
def test_direct_collective_mismatch_fails_every_rank(c_program, mode):
    # Rank 1 passes another count ("mismatch") or another datatype of the same
    # size ("dtype"): ncclInvalidUsage on every rank, each WARN naming a rank.
    p = host_direct_ok(c_program, mode, 3)
    assert len(re.findall(r"rank \d runs AllReduce of \d+ bytes of \w+, sum, root 0, where this rank runs AllReduce",
                          p.stderr)) == 3, p.stderr[-3000:]


@pytest.mark.timeout(120)
def test_inline_kind_mismatch_fails_every_rank(c_program):
    # Rank 1 calls a gather where ranks 0 and 2 call an all-to-all of the same
    # count (inline: 1200 bytes): ncclInvalidUsage on ranks 0 and 2, each WARN
    # naming rank 1's call. Rank 1, the gather's non-root, reads no other
    # rank's input and returns (as OpenMPI's rooted calls do) unless it sees
    # the others stopped already; then its next call fails with
    # ncclRemoteError, naming a rank that stopped.
    p = host_direct_ok(c_program, "kindmismatch", 3)
    theirs = re.findall(r"rank (\d) runs (\w+) of 400 bytes of float32, sum, root 0, where this rank runs (\w+)", p.stderr)
    assert ("1", "Gather", "AllToAll") in theirs, p.stderr[-3000:]
    assert sum(1 for t in theirs if t[0] == "1") == 2, p.stderr[-3000:]  # ranks 0 and 2 each name rank 1
    assert re.search(r"rank 1\): rank [02] stopped", p.stderr), p.stderr[-3000:]


@pytest.mark.timeout(120)
def test_inline_root_runs_seven_calls_ahead_and_no_more(c_program):
    # Rank 1 starts 1 s late: the broadcast root's first 8 calls return at
    # once (they need no other rank), its 9th waits for rank 1 to finish call
    # 1 (a rank publishes call c once every rank finished c - 8), and rank 1
    # gets every call's own values, from the descriptions (16 bytes) and from
    # the payloads (256 bytes). Running 8 ahead instead fails both ways.
    host_direct_ok(c_program, "runahead", 2)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode,theirs", [
    ("unread", r"rank \d\): rank \d made other collective calls than this rank before this one"),
    ("skipped", r"rank [12]\): rank 0 made other collective calls than this rank before this one"),
    ("latefail", r"rank [02]\): rank 1 stopped")])
def test_inline_mismatch_no_rank_compared_is_caught_later(c_program, mode, theirs):
    # Calls that differ where no rank reads another's (every rank a
    # broadcast's root: "unread"), or a call one rank made alone ("skipped"):
    # the running signature in every call's description fails the next call
    # that reads, with ncclInvalidUsage. A rank that reads nobody learns that
    # another failed at its next call, not up to 7 calls later ("latefail").
    for n in (2, 3):
        p = host_direct_ok(c_program, mode, n)
        assert re.search(theirs, p.stderr), p.stderr[-3000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode,message", [("dead", "waiting for rank 1 to start the direct collective: the peer process "
                                                   "has died"),
                                          ("abort", "rank 1 stopped (its direct collective failed, or its "
                                                    "communicator failed, was aborted or destroyed)"),
                                          ("destroy", "rank 1 stopped (its direct collective failed, or its "
                                                      "communicator failed, was aborted or destroyed)")])
def test_direct_collective_sees_a_dead_or_aborted_rank_at_once(c_program, mode, message):
    # Rank 1 exits ("dead"), or aborts ("abort") or destroys ("destroy") its
    # communicator and stays alive, instead of calling the allreduce: ranks 0 and 2 fail with
    # ncclRemoteError naming it within seconds, not at ACCL_TIMEOUT (60 s).
    p = run(c_program("host_direct"), mode, 3, env={"NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "WARN",
                                                     "ACCL_TIMEOUT": "60"}, timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr[-4000:]
    assert f"OK: {mode} rank seen after" in p.stdout
    assert p.stderr.count(message) == 2, p.stderr[-4000:]


@pytest.mark.timeout(150)
def test_fork_while_another_thread_is_in_the_library(c_program):
    # A thread checks bad communicators (the registry's lock, a WARN line
    # each) while the main thread forks children that make the same call: no
    # child may inherit a lock held by a thread it does not have. The first
    # forks race the thread's first call, where the library sets itself up, so
    # the run starts 20 fresh processes of 50 forks each.
    for attempt in range(20):
        p = run(c_program("fork_while_checking"), 50, env={"NCCL_DEBUG": "WARN"}, timeout=60)
        assert p.returncode == 0, f"process {attempt}: " + p.stdout + p.stderr[-2000:]
        assert "OK: 50 forks" in p.stdout


@pytest.mark.timeout(120)
def test_abort_while_another_thread_calls(c_program):
    # 300 times: a thread calls a 1-rank communicator without pause while the
    # main thread aborts it. Each call pins the communicator as it checks it;
    # before the pin, a call that had checked it went on into freed memory
    # (it looped for good in the tree's setup, reading a freed nranks).
    p = run(c_program("teardown_races"), "calls", 300, env={"NCCL_DEBUG": "NONE", "ACCL_TIMEOUT": "10"}, timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert "OK: calls" in p.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["allreduce", "sendrecv"])
def test_abort_reaches_an_operation_whose_data_keeps_moving(c_program, mode):
    # 2 ranks of one process move 2 GiB each on the ring (or one send); the
    # main thread aborts rank 0 once both are inside: its call must fail
    # within 1 s and half of what was left of the operation (its whole time is
    # measured first in the same program), not when its data is through.
    p = run(c_program("abort_moving"), mode, 2048, env={"NCCL_DEBUG": "NONE", "ACCL_DIRECT": "0"}, timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert f"OK: {mode}" in p.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("hosts", ["one", "own"])
def test_send_to_a_rank_that_exited_fails_at_once(c_program, hosts):
    # Rank 1 exits after init; rank 0's send must fail within seconds (its
    # listener refuses: gone, not late), name rank 1 and the step, and leave
    # the error on the communicator. Before, the connect was retried for
    # about 30 s (NCCL_SOCKET_RETRY_CNT), with a WARN naming only an address.
    p = run(c_program("p2p_peer_gone"), hosts, env={"NCCL_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "WARN"}, timeout=100)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert "OK" in p.stdout
    assert "rank 1 refused a connection" in p.stderr, p.stderr
    assert "setting up a connection (tag 3) with rank 1 failed while connecting to it" in p.stderr, p.stderr
