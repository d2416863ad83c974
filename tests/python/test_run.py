"""accl-run / python -m accl.run: programs run under it get ACCL's libnccl.so.2."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import accl

OURS = os.path.realpath(accl.library_path())
LIBDIR = os.path.realpath(accl.lib_dir())
TIMEOUT = 60

# The child's view of itself: its LD_* variables, every libnccl.so* mapped into
# it, and what dlopen("libnccl.so.2") -- by name -- resolves to.
PROBE = textwrap.dedent("""
    import ctypes, json, os, sys
    name = sys.argv[1] if len(sys.argv) > 1 else "libnccl.so.2"
    h = ctypes.CDLL(name)
    v = ctypes.c_int()
    assert h.ncclGetVersion(ctypes.byref(v)) == 0
    h.acclGetVersionString.restype = ctypes.c_char_p      # only ACCL exports it
    maps = [l.split()[-1] for l in open("/proc/self/maps") if "/" in l]
    print(json.dumps({
        "version": v.value,
        "accl": h.acclGetVersionString().decode(),
        "nccl_maps": sorted({os.path.realpath(p) for p in maps if os.path.basename(p).startswith("libnccl.so")}),
        "maps": list(dict.fromkeys(os.path.realpath(p) for p in maps)),
        "env": {k: os.environ.get(k) for k in ("LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "ACCL_RUN")},
        "pid": os.getpid(),
    }))
""")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "ACCL_RUN", "ACCL_AUDIT_NCCL",
                        "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")}
    env.update(extra)
    return env


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accl.run", *args], capture_output=True, text=True,
                          timeout=TIMEOUT, env=_clean_env() if env is None else env)


def _probe(*opts: str, env: dict[str, str] | None = None, name: str | None = None) -> dict:
    import json

    res = _run(*opts, sys.executable, "-c", PROBE, *([name] if name else []), env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def _libm() -> str:
    import ctypes

    ctypes.CDLL("libm.so.6")
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path) == "libm.so.6":
                return os.path.realpath(path)
    pytest.skip("libm.so.6 not found in /proc/self/maps")


# (1), (2): the package's libnccl.so.2 is loaded, and the name resolves to it.
def test_child_has_our_libnccl_loaded():
    info = _probe()
    assert info["nccl_maps"] == [OURS]
    assert info["env"]["LD_PRELOAD"] == accl.library_path()
    assert info["env"]["LD_LIBRARY_PATH"].split(":")[0] == accl.lib_dir()
    assert info["env"]["ACCL_RUN"] == "1"


def test_dlopen_by_name_gets_accl_through_one_handle():
    info = _probe()
    assert info["version"] == accl.nccl_version()
    assert info["accl"] == accl.__version__
    assert info["nccl_maps"] == [OURS]


def test_exec_keeps_pid_and_exit_status():
    code = "import os, sys; print(os.getpid(), flush=True); sys.exit(7)"
    proc = subprocess.Popen([sys.executable, "-m", "accl.run", sys.executable, "-c", code],
                            stdout=subprocess.PIPE, text=True, env=_clean_env())
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 7
    assert int(out.split()[0]) == proc.pid


# (3): LD_PRELOAD is composed, ours first, never twice.
def test_ld_preload_is_composed_with_an_existing_entry():
    libm = _libm()
    info = _probe(env=_clean_env(LD_PRELOAD=libm))
    assert info["env"]["LD_PRELOAD"] == f"{accl.library_path()}:{libm}"
    assert info["nccl_maps"] == [OURS]
    assert libm in info["maps"]  # both loaded; ld.so loads LD_PRELOAD entries in list order


def test_nested_and_already_present_do_not_duplicate():
    libm = _libm()
    nested = _probe(sys.executable, "-m", "accl.run", env=_clean_env(LD_PRELOAD=libm))
    assert nested["env"]["LD_PRELOAD"] == f"{accl.library_path()}:{libm}"
    assert nested["env"]["LD_LIBRARY_PATH"] == accl.lib_dir()
    # Ours listed after another entry (space-separated, as ld.so also allows) moves to the front.
    moved = _probe(env=_clean_env(LD_PRELOAD=f"{libm} {accl.library_path()}",
                                  LD_LIBRARY_PATH=f"/nonexistent:{accl.lib_dir()}"))
    assert moved["env"]["LD_PRELOAD"] == f"{accl.library_path()}:{libm}"
    assert moved["env"]["LD_LIBRARY_PATH"] == f"{accl.lib_dir()}:/nonexistent"


# --audit: LD_AUDIT redirects libnccl.so.2 / libnccl.so, even an explicit path.
@pytest.mark.parametrize("name", ["libnccl.so.2", "libnccl.so", "DECOY"])
def test_audit_redirects_requests_for_libnccl(tmp_path, name):
    if not (Path(accl.lib_dir()) / "libaccl_audit.so").is_file():
        pytest.skip("libaccl_audit.so is not installed")
    if name == "DECOY":  # an absolute path to some other "libnccl.so.2" (really libm)
        (tmp_path / "libnccl.so.2").symlink_to(_libm())
        name = str(tmp_path / "libnccl.so.2")
    info = _probe("--audit", name=name)
    assert info["accl"] == accl.__version__
    assert info["nccl_maps"] == [OURS]
    assert info["env"]["LD_PRELOAD"] is None
    assert info["env"]["LD_AUDIT"] == os.path.join(accl.lib_dir(), "libaccl_audit.so")


# (4) --print-env, --help, option errors.
def test_print_env():
    libm = _libm()
    res = _run("--print-env", env=_clean_env(LD_PRELOAD=libm))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines == [
        f"export LD_PRELOAD={shlex.quote(accl.library_path() + ':' + libm)}",
        f"export LD_LIBRARY_PATH={shlex.quote(accl.lib_dir())}",
        "export ACCL_RUN=1",
    ]
    audit = _run("--audit", "--print-env").stdout.splitlines()
    assert f"export LD_AUDIT={shlex.quote(os.path.join(accl.lib_dir(), 'libaccl_audit.so'))}" in audit
    assert not any(line.startswith("export LD_PRELOAD=") for line in audit)
    # The lines are valid shell: sourcing them gives the same environment.
    sh = subprocess.run(["sh", "-c", res.stdout + 'printf "%s\\n" "$LD_PRELOAD"'], capture_output=True,
                        text=True, timeout=TIMEOUT, env=_clean_env())
    assert sh.stdout.strip() == f"{accl.library_path()}:{libm}"


def test_help_and_double_dash():
    res = _run("--help")
    assert res.returncode == 0 and res.stdout.startswith("usage: accl-run")
    res = _run("--", sys.executable, "-c", "import os; print(os.environ['ACCL_RUN'])")
    assert res.returncode == 0 and res.stdout.strip() == "1", res.stderr
    res = _run("--bogus", "true")
    assert res.returncode == 2 and "unknown option '--bogus'" in res.stderr


# (5) exit codes like a shell's.
def test_missing_command_is_127():
    res = _run("accl-no-such-command-xyz", "arg")
    assert res.returncode == 127
    assert "accl-no-such-command-xyz: command not found" in res.stderr


def test_no_command_is_usage_error():
    for args in ((), ("--",), ("--audit",)):
        res = _run(*args)
        assert res.returncode == 2, args
        assert "missing command" in res.stderr and "usage: accl-run" in res.stderr


# (6) NCCL_DEBUG: the log says ACCL is in use.
INIT_ONE_RANK = "import accl\nwith accl.Communicator(1, accl.get_unique_id(), 0): pass"


def test_nccl_debug_info_identifies_accl():
    res = _run(sys.executable, "-c", INIT_ONE_RANK, env=_clean_env(NCCL_DEBUG="INFO"))
    assert res.returncode == 0, res.stderr
    # accl-run's line names the library; then the library's own INFO lines follow
    # (its "ready" line carries ACCL's mode, e.g. "host: ...", which NCCL has no notion of).
    assert f"accl-run: NCCL is ACCL {accl.__version__} ({accl.library_path()};" in res.stderr
    assert re.search(r"NCCL INFO .* rank 0/1 ready \((host|device)", res.stderr), res.stderr


def test_nccl_debug_version_names_accl_and_default_is_quiet():
    res = _run(sys.executable, "-c", INIT_ONE_RANK, env=_clean_env(NCCL_DEBUG="VERSION"))
    assert res.returncode == 0, res.stderr
    assert f"accl-run: NCCL is ACCL {accl.__version__}" in res.stderr
    # and the library's own line, as NCCL's "NCCL version" line, with its path
    m = re.search(r"NCCL INFO NCCL version 2\.30\.7\+accl(\S+): ACCL \S+ \((\S+)\); (host|device)", res.stderr)
    assert m and m.group(1) == accl.__version__, res.stderr
    assert os.path.realpath(m.group(2)) == os.path.realpath(accl.library_path())
    assert res.stderr.count("NCCL version") == 1  # once per process
    res = _run(sys.executable, "-c", INIT_ONE_RANK)
    assert res.returncode == 0 and "accl-run:" not in res.stderr, res.stderr
    assert "NCCL version" not in res.stderr  # NCCL_DEBUG unset: no version line


def test_console_script():
    script = Path(sys.executable).parent / "accl-run"
    if not script.is_file():
        pytest.skip("accl-run console script is not installed next to this Python")
    res = subprocess.run([str(script), "--print-env"], capture_output=True, text=True,
                         timeout=TIMEOUT, env=_clean_env())
    assert res.returncode == 0 and "export ACCL_RUN=1" in res.stdout, res.stderr


# torch (the CPU wheel has no libnccl): under accl-run, ours is in the process.
def test_torch_process_sees_our_library():
    pytest.importorskip("torch")
    code = textwrap.dedent("""
        import ctypes, os, torch
        h = ctypes.CDLL("libnccl.so.2")
        h.acclGetVersionString.restype = ctypes.c_char_p
        maps = {os.path.realpath(l.split()[-1]) for l in open("/proc/self/maps")
                if l.rstrip().endswith("/libnccl.so.2")}
        print(h.acclGetVersionString().decode(), *sorted(maps))
    """)
    res = _run(sys.executable, "-c", code)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [accl.__version__, OURS]
