"""python -m accl.info and python -m accl.perf, run as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import accl
from accl.perf import binding, launcher, options, table

HOST_MODE = not accl.query_mode()[0]


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout)


# -- accl.info ---------------------------------------------------------------
def test_info_prints_versions_mode_and_paths():
    res = _run("-m", "accl.info")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    code = accl.nccl_version()
    assert f"ACCL version   : {accl.__version__}" in out
    assert f"({code})" in out and f"2.{code // 100 % 100}.{code % 100}" in out
    assert accl.query_mode()[1] in out
    if HOST_MODE:
        assert "host" in out
    assert f"LD_PRELOAD={accl.library_path()}" in out
    assert f"-I{accl.include_dir()}" in out and "-lnccl" in out


def _driver_loads() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def test_mode_reason_says_what_is_true_and_the_table_shows_it_whole():
    # A build with CUDA on a machine without any NVIDIA driver says so (the
    # CUDA runtime's own words are "driver version is insufficient"); a
    # build without CUDA says that. The perf table shows the reason whole.
    info = accl._paths.build_info()
    is_device, reason = accl.query_mode()
    if _driver_loads():
        pytest.skip(f"a driver is here: {reason}")
    if info.get("cuda") != "ON":
        assert reason == "host: no NVIDIA driver found (no libcuda.so.1), and built without CUDA", reason
    else:
        assert reason == "host: no NVIDIA driver found (no libcuda.so.1)", reason
    assert "insufficient" not in reason
    res = _run("-m", "accl.perf", "allreduce", "-np", "1", "-b", "8", "-e", "8", "-n", "1", "-w", "0")
    assert res.returncode == 0, res.stdout + res.stderr
    line = next(line for line in res.stdout.splitlines() if "Rank  0" in line)
    assert line.endswith("[host] " + reason.split(": ", 1)[1]), line
    assert "built" in _run("-m", "accl.info").stdout


def test_perf_with_a_wrong_interface_says_so_in_a_few_lines():
    # No traceback, each interface named once, and no "run with NCCL_DEBUG"
    # hint beside the details it would give.
    env = dict(os.environ, NCCL_SOCKET_IFNAME="nosuchif0")
    res = subprocess.run([sys.executable, "-m", "accl.perf", "allreduce", "-np", "2", "-b", "8", "-e", "8"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode != 0
    err = res.stderr
    assert "Traceback" not in err and "NCCL_DEBUG=WARN for details" not in err, err
    assert "accl.perf: rank 0: ncclGetUniqueId failed: invalid usage (code 5): NCCL_SOCKET_IFNAME=nosuchif0 " \
           "matches no usable interface" in err, err
    found = err.split("(found: ", 1)[1].split(")", 1)[0].split(", ")
    assert "lo" in found and len(found) == len(set(found)), err
    assert len(err.splitlines()) <= 4, err


# -- accl.perf ---------------------------------------------------------------
HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong"
          "     time   algbw   busbw #wrong")


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]


@pytest.mark.skipif(not HOST_MODE, reason="accl.perf uses host arrays")
@pytest.mark.timeout(120)
def test_perf_allreduce_table():
    res = _run("-m", "accl.perf", "allreduce", "-np", "2", "-b", "8", "-e", "1M", "-f", "4",
               "-n", "2", "-w", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert HEADER in lines
    assert sum("Rank" in line and "Pid" in line for line in lines) == 2
    rows = _rows(res.stdout)
    assert [int(r[0]) for r in rows] == [8 * 4 ** k for k in range(9)]  # 8 B .. 512 KiB
    for r in rows:
        assert len(r) == 13, r
        size, count, dtype, op, root = r[:5]
        assert (int(count), dtype, op, root) == (int(size) // 4, "float", "sum", "-1")
        assert r[8] == "0" and r[12] == "0", f"wrong elements: {r}"  # #wrong, both sides
        for t, algbw, busbw in (r[5:8], r[9:12]):
            assert float(t) > 0
            assert float(busbw) == pytest.approx(float(algbw), abs=0.011)  # 2(n-1)/n = 1
    assert "# Out of bounds values : 0 OK" in lines
    assert any(line.startswith("# Avg bus bandwidth    : ") for line in lines)
    assert any(line.startswith("#   (in GB/s") for line in lines)  # its unit, on the line after


@pytest.mark.skipif(not HOST_MODE, reason="accl.perf uses host arrays")
@pytest.mark.timeout(120)
def test_perf_allreduce_three_ranks_other_types_and_ops():
    res = _run("-m", "accl.perf", "allreduce", "-np", "3", "-b", "1K", "-e", "4K", "-f", "2",
               "-n", "1", "-w", "0", "-d", "int32", "-o", "all")
    assert res.returncode == 0, res.stdout + res.stderr
    rows = _rows(res.stdout)
    ran = {r[3] for r in rows}
    assert {"sum", "prod", "max", "min"} <= ran
    for op in set(options.OPS) - ran:  # refused by the core: said so, not silently dropped
        assert f"# int32 {op}: skipped" in res.stdout
    assert len(rows) == 3 * len(ran)  # 1K, 2K, 4K
    assert all(r[2] == "int32" and r[8] == "0" and r[12] == "0" for r in rows), rows


@pytest.mark.skipif(not HOST_MODE, reason="accl.perf uses host arrays")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("isa", ["x86-64", "x86-64-v3", "x86-64-v4", "sse9"])
def test_perf_host_isa(isa):
    # ACCL_HOST_ISA picks the reduction kernels' instruction set; each gives
    # exact results on every datatype and op (float16 through F16C in v3 and
    # v4, fp8 through tables), on the ring (64 KiB) and on the direct path
    # (1 MiB). A set this CPU or build lacks, or a name that is none, is said
    # in a WARN, and the widest set runs instead. (Unit tests compare every
    # set's kernels with lowp.h bit for bit.)
    env = dict(os.environ, ACCL_HOST_ISA=isa, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="COLL")
    sweeps = [["all"]] if isa != "sse9" else [["half"]]  # all: the 12 types, bfloat16 and fp8 among them
    for types in sweeps:
        res = subprocess.run([sys.executable, "-m", "accl.perf", "allreduce", "-np", "2", "-b", "64K", "-e", "1M",
                              "-f", "16", "-n", "1", "-w", "0", "-o", "all", "-d", *types],
                             capture_output=True, text=True, timeout=60, env=env)
        assert res.returncode == 0, res.stdout + res.stderr
        rows = _rows(res.stdout)
        want = set(options.DATATYPES) if types == ["all"] else set(types)
        assert {r[2] for r in rows} >= want, rows
        assert all(r[8] == "0" and r[12] == "0" for r in rows), [r for r in rows if r[8] != "0" or r[12] != "0"]
        used = {line.rsplit("the ", 1)[1].split()[0] for line in res.stderr.splitlines()
                if "host reductions: the " in line}
        assert len(used) == 1, res.stderr[-2000:]  # both ranks chose the same set
        if used != {isa}:
            assert f"ACCL_HOST_ISA={isa}" in res.stderr and "WARN" in res.stderr, res.stderr[-2000:]


@pytest.mark.skipif(not HOST_MODE, reason="accl.perf uses host arrays")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("register", ["1", "2"])
def test_perf_registered_buffers(register):
    # -R 1: ncclCommRegister; -R 2: ncclMemAlloc arrays in symmetric windows,
    # which 3 processes of one host run as direct collectives (the INFO lines
    # say so; every result checked). Registered once for the sweep, as nccl-tests.
    env = dict(os.environ, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT", ACCL_DIRECT_MIN_BYTES="0")
    res = subprocess.run([sys.executable, "-m", "accl.perf", "allreduce", "-np", "3", "-b", "8", "-e", "3M", "-f", "8",
                          "-n", "2", "-w", "1", "-R", register, "-d", "int32", "-o", "all"],
                         capture_output=True, text=True, timeout=110, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = _rows(res.stdout)
    assert len(rows) >= 8 * 4 and all(r[8] == "0" and r[12] == "0" for r in rows), rows
    direct = res.stderr.count(": direct collectives (3 ranks on this host)")
    assert direct == (3 * 2 if register == "2" else 0), res.stderr[-3000:]  # 2 windows for the whole sweep


def test_sizes_and_step_options():
    assert options.parse_size("32M") == 32 << 20
    assert options.parse_size("1.5k") == 1536
    assert options.parse_size("8") == 8
    o = options.parse(["allreduce", "-b", "8", "-e", "128", "-f", "4"])
    assert o.sizes() == [8, 32, 128]
    o = options.parse(["allreduce", "-b", "1K", "-e", "3K", "-i", "1K"])
    assert o.stepfactor == 1 and o.sizes() == [1024, 2048, 3072]
    o = options.parse(["allreduce"])
    assert (o.minbytes, o.maxbytes, o.stepfactor, o.iters, o.warmup_iters, o.check) == \
        (32 << 20, 32 << 20, 2, 20, 5, 1)
    assert (o.datatypes, o.ops, o.nranks) == (["float"], ["sum"], 2)
    assert options.parse(["allreduce", "-b", "0", "-e", "8"]).sizes() == [0]
    with pytest.raises(SystemExit):
        options.parse(["allreduce", "-d", "complex"])
    # Not finite, or no positive timeout: a usage error, not a traceback or a false "timed out".
    for bad in (["-b", "inf"], ["-e", "1e400"], ["-b", "nan"], ["-T", "nan"], ["-T", "-1"], ["-T", "0"]):
        with pytest.raises(SystemExit):
            options.parse(["allreduce", *bad])
    assert options.parse(["allreduce", "-T", "2.5"]).timeout == 2.5


def test_table_number_format():
    assert table.float_str(18.5234, 7) == "  18.52"
    assert table.float_str(123456.7, 7) == " 123457"
    assert table.float_str(0.001, 6) == "  0.00"
    assert table.float_str(float("inf"), 6) == "   inf"


# The launcher with stand-in ranks: rank 0 hands back an id, then one rank
# fails or hangs.
STAND_IN = textwrap.dedent("""
    import os, sys, time
    rank = int(os.environ["ACCL_PERF_RANK"])
    if rank == 0:
        os.write(int(os.environ["ACCL_PERF_UID_FD"]), b"00ff\\n")
    elif os.environ.get("ACCL_PERF_UID") != "00ff":
        sys.exit(3)
    mode = sys.argv[1]
    if mode == "fail" and rank == 1:
        sys.exit(7)
    if mode == "hang" and rank == 1:
        time.sleep(600)
    time.sleep(0.2 if mode == "ok" else 60)
""")


@pytest.mark.timeout(60)
def test_launcher_success():
    assert launcher.launch(["ok"], 3, 30, command=[sys.executable, "-c", STAND_IN]) == 0


@pytest.mark.timeout(60)
def test_launcher_names_the_failing_rank(capfd):
    rc = launcher.launch(["fail"], 3, 30, command=[sys.executable, "-c", STAND_IN])
    assert rc == 7
    assert "rank 1 failed (exit code 7)" in capfd.readouterr().err


@pytest.mark.timeout(60)
def test_launcher_deadline_stops_every_rank(capfd):
    rc = launcher.launch(["hang"], 2, 1.5, command=[sys.executable, "-c", STAND_IN])
    assert rc == launcher.EXIT_TIMEOUT
    assert "timed out after 1.5 s; ranks still running: 0, 1" in capfd.readouterr().err


def test_launcher_sets_socket_ifname_for_children(monkeypatch):
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)
    monkeypatch.setenv("ACCL_PERF_UID", "stale")
    env = launcher._env(0, 2, 1e9)
    assert env["NCCL_SOCKET_IFNAME"] == "lo" and "ACCL_PERF_UID" not in env
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    assert launcher._env(1, 2, 1e9)["NCCL_SOCKET_IFNAME"] == "eth0"


def test_launcher_quiets_blas_threads_for_children(monkeypatch):
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert launcher._env(0, 2, 1e9)["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")  # the user's choice stays
    assert launcher._env(0, 2, 1e9)["OPENBLAS_NUM_THREADS"] == "4"


def test_bind_to_plan_and_description(monkeypatch):
    assert options.parse(["allreduce"]).bind_to == "core"
    assert options.parse(["allreduce", "--bind-to", "none"]).bind_to == "none"
    with pytest.raises(SystemExit):
        options.parse(["allreduce", "--bind-to", "socket"])
    monkeypatch.setattr(binding, "allowed_cpus", lambda: [2, 5, 7])
    assert binding.plan("core", 2) == [2, 5]  # rank r on the r-th allowed CPU
    assert binding.plan("core", 3) == [2, 5, 7]
    assert binding.plan("core", 4) is None  # more ranks than CPUs: unbound
    assert binding.plan("none", 2) is None
    assert binding.describe("core", [2, 5], 2).startswith("# Ranks bound to CPUs 2,5,")
    assert binding.describe("core", None, 4) == \
        "# Ranks not bound to CPUs (4 ranks, 3 CPUs allowed)"
    assert binding.describe("none", None, 2) == "# Ranks not bound to CPUs (--bind-to none)"
    monkeypatch.setattr(binding, "allowed_cpus", lambda: [])
    assert binding.plan("core", 1) is None


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_bind_to_core_binds_this_process():
    before = os.sched_getaffinity(0)
    try:
        cpus = binding.apply("core", 0, 1)
        assert cpus == [min(before)] and os.sched_getaffinity(0) == {min(before)}
    finally:
        os.sched_setaffinity(0, before)
