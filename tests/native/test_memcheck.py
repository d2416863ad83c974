"""Teardown and abort paths under valgrind's memcheck. A use after free or a
double free on these paths seldom crashes: it corrupts memory, and the program
goes on. Where valgrind is missing the programs run plainly, which still checks
their results (ci/test.sh installs it)."""
import os
import shutil
import subprocess

import pytest

VALGRIND = shutil.which("valgrind")
# Leaks are not errors here: a communicator keeps process-wide state for life.
MEMCHECK = [VALGRIND, "-q", "--error-exitcode=99", "--errors-for-leak-kinds=none"] if VALGRIND else []


@pytest.mark.timeout(240)
@pytest.mark.parametrize("program,args,ok", [
    # windows, puts, signals, then ncclCommDestroy: the RMA receiver stopped twice
    ("rma", ("threads", 2), "OK: 2 ranks"),
    # ncclCommAbort while a blocking init runs on another thread, or before its group ends;
    # ncclCommDestroy while another thread's allreduce waits in the communicator
    ("teardown_races", ("blocking",), "OK: blocking"),
    ("teardown_races", ("group",), "OK: group"),
    ("teardown_races", ("destroy",), "OK: destroy"),
    # a group's call on a communicator another thread destroyed; stale window handles
    ("teardown_races", ("queued",), "OK: queued"),
    ("teardown_races", ("window",), "OK: window"),
    # a failed group, and communicators destroyed or aborted with calls queued in an open group
    ("group_error", (), "OK"),
])
def test_no_memory_errors_on_teardown(c_program, program, args, ok):
    env = dict(os.environ, NCCL_SOCKET_IFNAME="lo", NCCL_DEBUG="WARN", ACCL_TIMEOUT="2")
    p = subprocess.run(MEMCHECK + [str(c_program(program)), *map(str, args)], capture_output=True, text=True,
                       timeout=220, env=env)
    assert p.returncode == 0, p.stdout + p.stderr[-6000:]
    assert ok in p.stdout
