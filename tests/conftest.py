"""Shared fixtures: where the installed library and header are, compiling the
C test programs against them (exactly as a C user would), the CMake-built unit
test binary, and running rank processes with deadlines."""
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import native_build

ROOT = Path(__file__).resolve().parent.parent
C_DIRS = (ROOT / "tests" / "c", ROOT / "tests" / "abi")


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    # Tests talk only over loopback, never over the machine's real interfaces.
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", os.environ.get("ACCL_TEST_IFNAME", "lo"))


@pytest.fixture(scope="session")
def accl_paths():
    import accl

    lib = Path(accl.library_path())
    inc = Path(accl.include_dir())
    assert lib.is_file(), lib
    assert (inc / "nccl.h").is_file(), inc
    return lib, inc


@pytest.fixture(scope="session")
def c_program(accl_paths, tmp_path_factory):
    """Compiles tests/c/NAME.c with `cc -I<include> -L<lib> -lnccl`; returns the binary path."""
    lib, inc = accl_paths
    out = tmp_path_factory.mktemp("cbin")
    built = {}

    def build(name, lang="c"):
        if (name, lang) in built:
            return built[(name, lang)]
        exe = out / f"{name}-{lang}"
        compiler = [os.environ.get("CC", "cc"), "-std=c99"] if lang == "c" else [
            os.environ.get("CXX", "c++"), "-x", "c++", "-std=c++17"]
        src = next(d / f"{name}.c" for d in C_DIRS if (d / f"{name}.c").exists())
        cmd = compiler + ["-O2", "-Wall", "-Werror", f"-I{inc}", str(src), "-o", str(exe),
                          f"-L{lib.parent}", "-lnccl", f"-Wl,-rpath,{lib.parent}"]
        subprocess.run(cmd, check=True, timeout=120)
        built[(name, lang)] = exe
        return exe

    return build


@pytest.fixture(scope="session")
def unit_test_binary():
    """The C++ unit tests, built by CMake from this source tree (they link internals)."""
    try:
        return native_build.build() / "tests" / "cpp" / "accl_unit_tests"
    except RuntimeError as e:
        pytest.fail(str(e))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def comm_id():
    """An NCCL_COMM_ID on loopback with a free port."""
    return f"127.0.0.1:{free_port()}"
