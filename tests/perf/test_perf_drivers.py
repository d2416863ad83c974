"""The nccl-tests-style perf drivers (perf/): built by CMake from this tree, run
on loopback in host mode. Each run's table must parse and every checked part
must have #wrong 0. A driver whose collective the library does not support yet
is skipped, not failed."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import native_build
from nccl_table import Table

ROOT = Path(__file__).resolve().parents[2]
DRIVERS = ["all_reduce", "all_gather", "broadcast", "reduce", "reduce_scatter", "alltoall", "gather", "scatter",
           "sendrecv"]
ROOTED = {"broadcast", "reduce", "gather", "scatter"}
SMALL = ["-b", "8", "-e", "1M", "-f", "4", "-n", "2", "-w", "1"]
RUN_TIMEOUT = 120  # seconds for one driver run; each run also has its own watchdog (-T)
NOT_YET = re.compile(r"not supported .*yet|not implemented", re.I)


@pytest.fixture(scope="session")
def perf_bin():
    """Directory of the driver binaries: perf/ of the tests' native build,
    against the libnccl.so.2 of the same build."""
    try:
        return native_build.build() / "perf"
    except RuntimeError as e:
        pytest.fail(str(e))


def run(binary, *args, env=None, timeout=RUN_TIMEOUT):
    full_env = dict(os.environ, **(env or {}))
    full_env.setdefault("NCCL_SOCKET_IFNAME", "lo")
    return subprocess.run([str(binary)] + [str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                          env=full_env)


def sizes(minb, maxb, factor):
    out, s = [], minb
    while s <= maxb:
        out.append(s)
        s *= factor
    return out


def test_all_reduce_threads(perf_bin):
    p = run(perf_bin / "all_reduce_perf", *SMALL, "-t", "2", "-T", "60")
    assert p.returncode == 0, p.stdout + p.stderr
    t = Table(p.stdout)
    t.assert_clean()
    assert len(t.devices) == 2
    assert "# nThread 2 nGpus 1 minBytes 8 maxBytes 1048576 step: 4(factor)" in p.stdout
    assert [r["size"] for r in t.rows] == sizes(8, 1 << 20, 4)
    for r in t.rows:
        assert (r["type"], r["redop"], r["root"], r["count"]) == ("float", "sum", -1, r["size"] // 4)
        assert r["oop"][3] == "0" and r["ip"][3] == "0"
        # busbw = algbw * 2(n-1)/n = algbw for 2 ranks (both printed rounded)
        assert abs(r["oop"][2] - r["oop"][1]) <= 0.011


def test_all_reduce_threads_and_gpus(perf_bin):
    p = run(perf_bin / "all_reduce_perf", *SMALL, "-t", "2", "-g", "2", "-T", "60")
    assert p.returncode == 0, p.stdout + p.stderr
    t = Table(p.stdout)
    t.assert_clean()
    assert [int(d.split()[2]) for d in t.devices] == [0, 1, 2, 3]
    assert all(r["oop"][3] == "0" and r["ip"][3] == "0" for r in t.rows)


def test_all_reduce_every_type_and_op(perf_bin):
    p = run(perf_bin / "all_reduce_perf", *SMALL, "-t", "2", "-d", "all", "-o", "all", "-T", "60")
    assert p.returncode == 0, p.stdout + p.stderr
    t = Table(p.stdout)
    t.assert_clean()
    tested = {(r["type"], r["redop"]) for r in t.rows}
    skipped = {tuple(s.split(":")[0].split()) for s in t.skips}
    types = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3",
             "f8e5m2"]
    ops = ["sum", "prod", "max", "min", "avg", "mulsum"]
    assert tested | skipped == {(ty, op) for ty in types for op in ops}, p.stdout
    assert not tested & skipped
    for ty in ("int32", "float", "double"):
        for op in ("sum", "prod", "max", "min"):
            assert (ty, op) in tested, f"{ty} {op} skipped: {p.stdout}"
    per_combo = len(sizes(8, 1 << 20, 4))
    assert len(t.rows) == per_combo * len(tested)


def test_premulsum_destroyed_inside_a_group(perf_bin):
    # -g 2 puts both ranks' calls in one group; the PreMulSum operator of each
    # call is destroyed right after the call returns, which NCCL allows.
    p = run(perf_bin / "all_reduce_perf", "-b", "1K", "-e", "4K", "-f", "4", "-n", "2", "-g", "2", "-d", "int32",
            "-o", "mulsum", "-T", "60")
    if p.returncode != 0 and NOT_YET.search(p.stdout + p.stderr):
        pytest.skip("PreMulSum not supported yet")
    assert p.returncode == 0, p.stdout + p.stderr
    Table(p.stdout).assert_clean()


@pytest.mark.parametrize("name", DRIVERS[1:])
def test_other_drivers(perf_bin, name):
    args = ["-b", "8", "-e", "256K", "-f", "8", "-n", "2", "-w", "1", "-t", "2", "-g", "2", "-T", "60"]
    if name in ROOTED:
        args += ["-r", "1"]
    p = run(perf_bin / f"{name}_perf", *args)
    out = p.stdout + p.stderr
    if p.returncode != 0 and NOT_YET.search(out):
        pytest.skip(f"{name}: the library does not support it yet")
    assert p.returncode == 0, out
    t = Table(p.stdout)
    t.assert_clean()
    assert len(t.devices) == 4
    assert all(r["root"] == (1 if name in ROOTED else -1) for r in t.rows)
    if name == "sendrecv":
        assert all(r["ip"][3] == "N/A" for r in t.rows)  # as nccl-tests: in place is not checked


@pytest.mark.parametrize("name", ["broadcast", "reduce_scatter", "alltoall"])
def test_other_drivers_every_type(perf_bin, name):
    args = ["-b", "64", "-e", "64K", "-f", "32", "-n", "1", "-w", "1", "-t", "3", "-d", "all", "-T", "60"]
    if name in ROOTED:
        args += ["-r", "all"]
    p = run(perf_bin / f"{name}_perf", *args)
    t = Table(p.stdout)
    if p.returncode == 0 and not t.rows and t.skips and all(NOT_YET.search(s) for s in t.skips):
        pytest.skip(f"{name}: the library does not support it yet")
    assert p.returncode == 0, p.stdout + p.stderr
    t.assert_clean()


def test_json_and_csv(perf_bin, tmp_path):
    import csv
    import json

    js, cs = tmp_path / "out.json", tmp_path / "out.csv"
    p = run(perf_bin / "all_reduce_perf", "-b", "1K", "-e", "16K", "-f", "4", "-n", "2", "-t", "2", "-c", "0",
            "-J", js, "--csv", cs)
    assert p.returncode == 0, p.stdout + p.stderr
    t = Table(p.stdout)
    t.assert_clean()
    assert all(r["oop"][3] == "N/A" and r["ip"][3] == "N/A" for r in t.rows)  # -c 0
    doc = json.loads(js.read_text())
    assert doc["nranks"] == 2 and doc["out_of_bounds"] == 0
    assert [r["size"] for r in doc["rows"]] == [r["size"] for r in t.rows]
    assert all(r["out_of_place"]["wrong"] is None for r in doc["rows"])
    rows = list(csv.DictReader(cs.read_text().splitlines()))
    assert [int(r["size"]) for r in rows] == [r["size"] for r in t.rows]


def test_options_with_nccl_tests_meaning(perf_bin):
    p = run(perf_bin / "reduce_perf", "-b", "1K", "-e", "4K", "-i", "1K", "-n", "3", "-w", "0", "-t", "3", "-r", "all",
            "-d", "int32", "-o", "max", "-z", "1", "-m", "2", "-N", "2", "-a", "3", "-C", "1", "-T", "60")
    if p.returncode != 0 and NOT_YET.search(p.stdout + p.stderr):
        pytest.skip("reduce not supported yet")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "# Blocking Enabled" in p.stdout
    assert "cputime" in p.stdout.split("# Using devices")[1]
    t = Table(p.stdout.replace("cputime", "time"))
    t.assert_clean()
    # 3 sizes (stepbytes 1K) x 2 cycles for each of the 3 roots
    assert [(r["root"], r["size"]) for r in t.rows] == [(root, s) for root in range(3) for _ in range(2)
                                                        for s in (1024, 2048, 3072, 4096)]


@pytest.mark.parametrize("mode", [1, 2])
@pytest.mark.parametrize("name", ["all_reduce", "broadcast"])
def test_registered_buffers(perf_bin, name, mode):
    """-R 1: ncclCommRegister on every buffer; -R 2: ncclMemAlloc'd buffers in
    windows registered with NCCL_WIN_COLL_SYMMETRIC."""
    args = SMALL + ["-t", "3", "-R", str(mode), "-T", "60"] + (["-r", "all"] if name in ROOTED else [])
    p = run(perf_bin / f"{name}_perf", *args)
    assert p.returncode == 0, p.stdout + p.stderr
    Table(p.stdout).assert_clean()


def test_symmetric_windows_of_several_ranks_per_thread(perf_bin):
    """-g 2 -R 2: one thread registers both ranks' windows inside a group."""
    p = run(perf_bin / "all_reduce_perf", *SMALL, "-t", "2", "-g", "2", "-R", "2", "-T", "60")
    assert p.returncode == 0, p.stdout + p.stderr
    Table(p.stdout).assert_clean()


@pytest.mark.parametrize("reg", ["2", "0"], ids=["windows", "plain"])
@pytest.mark.parametrize("name", ["all_reduce", "all_gather", "broadcast", "reduce", "reduce_scatter"])
def test_direct_collectives_between_processes(perf_bin, name, reg):
    """Processes under mpirun run the direct collectives (coll/host_direct.h):
    -R 2, ncclMemAlloc'd buffers (memfd) in symmetric windows that every
    process maps; -R 0, plain buffers, reached through cross memory attach.
    Every datatype and op (and root), in place and out of place, 2 and 3
    processes, and a size that leaves a tail after the chunks."""
    mpirun = shutil.which("mpirun")
    binary = perf_bin / f"{name}_perf"
    if not mpirun or not _links_mpi(binary):
        pytest.skip("built without MPI, or no mpirun")
    for np_, extra in (("2", ["-d", "all"] + (["-o", "all"] if name in ("all_reduce", "reduce", "reduce_scatter")
                                              else []) + (["-r", "all"] if name in ROOTED else [])),
                       ("3", ["-b", "8", "-e", "3000000", "-f", "7", "-d", "float"])):
        # ACCL_DIRECT_MIN_BYTES=0: the small sizes run direct too (by default they take the ring).
        cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", np_, "-x", "NCCL_SOCKET_IFNAME=lo", "-x",
               "NCCL_DEBUG=INFO", "-x", "NCCL_DEBUG_SUBSYS=INIT,COLL", "-x", "ACCL_DIRECT_MIN_BYTES=0",
               str(binary)] + SMALL + ["-R", reg, "-T", "60"] + extra
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        assert p.returncode == 0, p.stdout + p.stderr
        Table(p.stdout).assert_clean()
        if reg == "2":
            assert p.stderr.count("window #0: direct collectives") == int(np_), p.stderr[-3000:]
        else:  # each rank's first direct call reached the others' buffers through cross memory attach only
            first = re.findall(r"runs direct \(first such call\); other ranks' buffers: 0 in windows mapped here, "
                               r"[1-9]\d* through cross memory attach, 0 in this process", p.stderr)
            assert len(first) == int(np_), p.stderr[-3000:]


@pytest.mark.parametrize("name,extra", [("all_reduce", ["-d", "all"]), ("all_gather", []),
                                        ("reduce_scatter", []), ("broadcast", ["-r", "all"]), ("alltoall", []),
                                        ("sendrecv", [])])
def test_sockets_between_processes(perf_bin, name, extra):
    """Every process its own NCCL_HOSTID, so every byte crosses a socket
    (transport/net.cc): from one frame to messages larger than the sockets'
    buffers, whose frames go out in pieces, moved by the waiting rank thread
    or by the proxy; checked exactly by the driver, 3 processes (unbound:
    the proxies move frames while a rank computes), 2 processes of 2 ranks
    each (-t 2, each process bound to a core: a rank drives its connections
    for the whole call, coll/steps.h), and 4 processes bound 2 to a core."""
    mpirun = shutil.which("mpirun")
    binary = perf_bin / f"{name}_perf"
    if not mpirun or not _links_mpi(binary):
        pytest.skip("built without MPI, or no mpirun")
    for np_, bind, more in (("3", "none", extra), ("2", "core", ["-t", "2", "-d", "int32"]),
                            ("4", "core:overload-allowed", ["-d", "int32"])):
        cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", bind, "-np", np_, "-x",
               "NCCL_SOCKET_IFNAME=lo", "sh",
               "-c", 'NCCL_HOSTID=host$OMPI_COMM_WORLD_RANK exec "$0" "$@"', str(binary), "-b", "8", "-e", "8M",
               "-f", "32", "-n", "2", "-w", "1", "-c", "1", "-T", "60"] + more
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        assert p.returncode == 0, p.stdout + p.stderr
        t = Table(p.stdout)
        t.assert_clean()
        assert len(t.rows) >= 5, p.stdout  # 8 B to 8 MiB


@pytest.mark.parametrize("args,message", [
    (["-d", "float17"], "invalid value 'float17' for -d"),
    (["-o", "xor"], "invalid value 'xor' for -o"),
    (["-b", "1Q"], "invalid value '1Q' for -b"),
    (["-b", "1M", "-e", "1K"], "invalid sizes"),
    (["-t", "0"], "invalid value '0' for -t"),
    (["--bogus"], "unknown option"),
    (["-R", "3"], "invalid value '3' for -R"),
])
def test_bad_options(perf_bin, args, message):
    p = run(perf_bin / "all_reduce_perf", *args, timeout=30)
    assert p.returncode == 2
    assert message in p.stderr


def test_root_out_of_range(perf_bin):
    p = run(perf_bin / "broadcast_perf", "-b", "8", "-e", "8", "-t", "2", "-r", "2", timeout=30)
    assert p.returncode == 2 and "invalid root 2" in p.stderr


def _shim(tmp_path):
    """An LD_PRELOAD library that wraps ncclAllReduce: corrupts rank SHIM_CORRUPT's
    output, never returns on rank SHIM_HANG, or refuses SHIM_REFUSE's datatype
    (ncclInvalidUsage) as the library does with what it does not support."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    if not cc:
        pytest.skip("no C compiler for the LD_PRELOAD shim")
    src = tmp_path / "shim.c"
    src.write_text(r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
#include "nccl.h"
typedef ncclResult_t (*fn_t)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t st) {
  fn_t real = (fn_t)dlsym(RTLD_NEXT, "ncclAllReduce");
  int rank = -1;
  ncclCommUserRank(c, &rank);
  const char* refuse = getenv("SHIM_REFUSE");
  if (refuse && atoi(refuse) == (int)t) return ncclInvalidUsage;
  const char* hang = getenv("SHIM_HANG");
  if (hang && atoi(hang) == rank) for (;;) sleep(1);
  ncclResult_t res = real(s, r, n, t, op, c, st);
  const char* bad = getenv("SHIM_CORRUPT");
  if (res == ncclSuccess && n > 0 && bad && atoi(bad) == rank) ((unsigned char*)r)[0] ^= 0x40;
  return res;
}
""")
    lib = tmp_path / "shim.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-DACCL_NO_CUDA_HEADERS", f"-I{ROOT / 'include'}", str(src), "-o",
                    str(lib), "-ldl"], check=True, timeout=60)
    return lib


def test_wrong_results_are_counted(perf_bin, tmp_path):
    lib = _shim(tmp_path)
    p = run(perf_bin / "all_reduce_perf", "-b", "8", "-e", "4K", "-f", "8", "-n", "2", "-t", "2", "-d", "int8",
            "-T", "60", env={"LD_PRELOAD": str(lib), "SHIM_CORRUPT": "1"})
    assert p.returncode == 1, p.stdout + p.stderr
    t = Table(p.stdout)
    assert t.rows and all(r["oop"][3] == "1" and r["ip"][3] == "1" for r in t.rows)
    assert t.out_of_bounds == 2 * len(t.rows)
    assert "FAILED" in p.stdout


def test_watchdog_stops_a_stuck_collective(perf_bin, tmp_path):
    lib = _shim(tmp_path)
    p = run(perf_bin / "all_reduce_perf", "-b", "8", "-e", "64", "-t", "2", "-T", "2", timeout=60,
            env={"LD_PRELOAD": str(lib), "SHIM_HANG": "1"})
    assert p.returncode == 3, p.stdout + p.stderr
    assert "watchdog: no progress for 2 s" in p.stderr
    assert "rank 1: ncclAllReduce" in p.stderr


def test_refusal_is_an_error_naming_the_rank(perf_bin, tmp_path):
    lib = _shim(tmp_path)
    env = {"LD_PRELOAD": str(lib), "SHIM_REFUSE": "7"}  # ncclFloat32, the default -d
    p = run(perf_bin / "all_reduce_perf", "-b", "8", "-e", "64", "-t", "2", "-T", "60", env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    assert re.search(r"all_reduce_perf: rank [01]: ncclAllReduce failed: invalid usage", p.stderr), p.stderr


def test_refusal_is_a_skip_with_all(perf_bin, tmp_path):
    lib = _shim(tmp_path)
    env = {"LD_PRELOAD": str(lib), "SHIM_REFUSE": "7"}
    p = run(perf_bin / "all_reduce_perf", "-b", "8", "-e", "64", "-f", "8", "-t", "2", "-d", "all", "-o", "min",
            "-T", "60", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    t = Table(p.stdout)
    t.assert_clean()
    others = [s for s in t.skips if not s.startswith("float min:")]
    assert len(others) == len(t.skips) - 1 and all(NOT_YET.search(s) for s in others), t.skips
    assert "float" not in {r["type"] for r in t.rows} and t.rows
    assert f"# Skipped {len(t.skips)} of 12 tests" in p.stdout


def _links_mpi(binary):
    p = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=30)
    return "libmpi" in p.stdout


def test_mpi_processes(perf_bin):
    mpirun = shutil.which("mpirun")
    binary = perf_bin / "all_reduce_perf"
    if not mpirun or not _links_mpi(binary):
        pytest.skip("built without MPI, or no mpirun")
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "NCCL_SOCKET_IFNAME=lo",
           str(binary)] + SMALL + ["-t", "2", "-T", "60"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert p.returncode == 0, p.stdout + p.stderr
    t = Table(p.stdout)
    t.assert_clean()
    assert [int(d.split()[2]) for d in t.devices] == [0, 1, 2, 3]
    assert len({d.split()[6] for d in t.devices}) == 2  # two processes (pids)


def test_membw_prints_a_row_per_size(perf_bin):
    # The memory-limit probe docs/perf.md reads busbw against: one row per
    # size, positive rates, and each total the sum of the threads' rates (the
    # per-thread column is their mean). Both are printed to 0.1, so the total
    # may differ from threads x mean by the rounding of both: 0.05 each.
    threads = 2
    p = run(perf_bin / "membw", "-t", threads, "-b", "64K", "-e", "256K", "-f", "4", timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [line.split() for line in p.stdout.splitlines() if line.strip() and not line.startswith("#")]
    assert [int(r[0]) for r in rows] == [65536, 262144]
    rounding = 0.05 * (threads + 1)
    for r in rows:
        per_copy, total_copy, per_add, total_add = map(float, r[1:])
        assert per_copy > 0 and per_add > 0
        assert abs(total_copy - threads * per_copy) <= rounding + 1e-9, r
        assert abs(total_add - threads * per_add) <= rounding + 1e-9, r
    bad = run(perf_bin / "membw", "-x", "1", timeout=30)
    assert bad.returncode == 2 and "usage" in bad.stderr
