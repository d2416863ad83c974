#!/usr/bin/env bash
# The project's test command (README): installs what the tests need, builds and
# installs the package from this checkout, and runs the whole pytest suite.
# Works on a fresh machine with Python 3.9+, a C/C++ compiler and network access
# to PyPI; CUDA (nvcc) is optional.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# valgrind for the memory-error tests (tests/native/test_memcheck.py run the
# programs plainly without it), and Open MPI for the tests that run under
# mpirun (the perf drivers' MPI mode, the --compare mpi peer, the mpirun
# suite), where this machine's package manager can add them. Before the
# build and the tests: the perf drivers link MPI only when it is found.
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  pkgs=()
  command -v valgrind >/dev/null || pkgs+=(valgrind)
  { command -v mpirun && command -v mpicc; } >/dev/null || pkgs+=(openmpi-bin libopenmpi-dev)
  if [ ${#pkgs[@]} -gt 0 ]; then
    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${pkgs[@]}" >/dev/null ||
      echo "not installed: ${pkgs[*]}"
  fi
fi
"$PY" -m pip install -q --upgrade pip
command -v cmake >/dev/null || "$PY" -m pip install -q "cmake>=3.18"
if command -v mpicc >/dev/null && ! "$PY" -c "import mpi4py" 2>/dev/null; then
  "$PY" -m pip install -q mpi4py || echo "mpi4py not installed"
fi
"$PY" -m pip install -q pytest pytest-timeout numpy ml_dtypes
"$PY" -m pip install -q ".[test]"
# The CPU torch wheel (on this kind of machine's disk) for the accl.torch backend tests.
"$PY" -m pip install -q torch==2.13.0

# pytest-timeout bounds every test; multi-process tests carry their own deadlines.
"$PY" -m pytest -q tests "$@"
# The mpirun suite (docs/testing-mpi.md): collectives checked against MPI at 2, 3 and 4 ranks.
[ "${ACCL_SKIP_MPI:-0}" = 1 ] || PYTHON="$PY" bash ci/mpi.sh
