#!/usr/bin/env bash
# The project's test command (README). About 8 minutes on a fresh 2-core
# machine without a GPU (2-3 more with ACCL_CUDA=ON, which CI sets); each step
# says what it usually takes.
#   1. system packages: Open MPI (the mpirun suite, the perf drivers' MPI mode,
#      --compare mpi), valgrind (tests/native/test_memcheck.py) and clang (the
#      fuzzers, tests/native/test_fuzz.py), where this machine's package
#      manager can add them (root with apt)
#   2. the Python packages of the tests and of the build
#   3. accl from this checkout, unless the installed one was built from it and
#      no source changed since (`pip install .` before this: README, command 1)
#   4. the native test programs (C++ unit tests, perf drivers): one CMake build
#   5. every pytest suite in a process of its own, then the mpirun suite
#   6. one summary of every suite; the exit status is 1 if any failed
# Usage: bash ci/test.sh [pytest args, given to every suite]
#   ACCL_SKIP_MPI=1: no mpirun suite. ACCL_CUDA=ON: accl built with the CUDA
#   kernels even without a GPU driver (the compile check). PYTHON: the interpreter.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
RESULTS=$(mktemp -d /tmp/accl-test.XXXXXX)
START=$(date +%s)
step() { printf '\n==> [%s/6] %s (%s)\n' "$1" "$2" "$3"; }
die() { echo "ci/test.sh: $*" >&2; exit 1; }
# pip, quiet, without the notes it repeats on every call as root or about absent wheel folders.
pipq() {
  PIP_ROOT_USER_ACTION=ignore "$PY" -m pip install -q "$@" 2>&1 | grep -v "^WARNING: Location '.*' is ignored"
  return "${PIPESTATUS[0]}"
}

step 1 "system packages: Open MPI, valgrind, clang" "about 1 minute where they are missing, else nothing"
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  pkgs=()
  command -v valgrind >/dev/null || pkgs+=(valgrind)
  command -v clang++ >/dev/null || pkgs+=(clang)  # libFuzzer: tests/native/test_fuzz.py
  { command -v mpirun && command -v mpicc; } >/dev/null || pkgs+=(openmpi-bin libopenmpi-dev)
  if [ ${#pkgs[@]} -gt 0 ]; then
    echo "apt-get install ${pkgs[*]}"
    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${pkgs[@]}" >/dev/null ||
      echo "not installed: ${pkgs[*]} (the tests that need them skip)"
  fi
else
  echo "not root with apt: using what is installed (without Open MPI or valgrind their tests skip)"
fi

step 2 "Python packages" "about 30 s the first time"
pipq --upgrade pip || die "pip is not usable with $PY"
command -v cmake >/dev/null || pipq "cmake>=3.18" || die "cannot install cmake"
if command -v mpicc >/dev/null && ! "$PY" -c "import mpi4py" 2>/dev/null; then
  pipq mpi4py || echo "mpi4py not installed (its tests skip)"
fi
# The build's own requirements: accl is built without pip's build isolation,
# so that its build folder (build/<wheel tag>) serves the next build too.
pipq pytest pytest-timeout numpy "ml_dtypes>=0.3" matplotlib "scikit-build-core>=0.10" "nanobind>=2.0" ||
  die "cannot install the test requirements"
# The CPU torch wheel (on this kind of machine's disk) for the accl.torch backend tests.
pipq torch==2.13.0 || echo "torch not installed (the accl.torch tests skip)"

step 3 "accl from this checkout" "about 40 s without the CUDA kernels, 3 minutes with them; nothing when up to date"
why=$("$PY" ci/installed.py) && echo "reused: $why" || {
  echo "building: $why"
  PIP_ROOT_USER_ACTION=ignore "$PY" -m pip install --no-build-isolation -v ".[test]" >"$RESULTS/install.log" 2>&1 &
  pip_pid=$!
  # Progress: CMake's choice of CUDA and the build's [done/total] lines.
  tail -n +1 --pid=$pip_pid -f "$RESULTS/install.log" | grep --line-buffered -oE 'ACCL: CUDA .*|\[[0-9]+/[0-9]+\] [A-Za-z]+ [A-Za-z]+ .*' |
    sed -u 's|/[^ ]*/\(src\|python\)/|\1/|'
  wait $pip_pid || { tail -n 40 "$RESULTS/install.log"; die "pip install failed (the whole log: $RESULTS/install.log)"; }
  why=$("$PY" ci/installed.py) || die "installed, yet not from this checkout: $why"
}

step 4 "native test programs: unit tests, perf drivers" "about 1 minute; nothing when up to date"
"$PY" tests/native_build.py || die "the native build failed"

step 5 "test suites" "about 6 minutes"
n=10
for suite in native python perf faults torch_backend gpu; do
  n=$((n + 1))
  echo; echo "--- tests/$suite"
  t0=$(date +%s)
  "$PY" -m pytest -q tests/$suite --junitxml="$RESULTS/$n-$suite.xml" "$@"
  printf '%s %s\n' $? $(( $(date +%s) - t0 )) >"$RESULTS/$n-$suite.rc"
done
# The mpirun suite (docs/testing-mpi.md): collectives checked against MPI at 2, 3 and 4 ranks.
if [ "${ACCL_SKIP_MPI:-0}" = 1 ]; then
  echo "skip ACCL_SKIP_MPI=1" >"$RESULTS/20-mpi.rc"
else
  echo; echo "--- tests/mpi under mpirun"
  t0=$(date +%s)
  ACCL_RESULTS_DIR="$RESULTS" PYTHON="$PY" bash ci/mpi.sh "$@"
  rc=$?
  # A failure before any run (Open MPI or mpi4py missing) still shows in the summary.
  ls "$RESULTS"/2*-mpi-np*.rc >/dev/null 2>&1 || echo "$rc $(( $(date +%s) - t0 ))" >"$RESULTS/20-mpi.rc"
fi

step 6 "summary" "every suite, whatever failed before"
"$PY" ci/summary.py "$RESULTS"
status=$?
echo "ci/test.sh took $(( ($(date +%s) - START) / 60 )) min $(( ($(date +%s) - START) % 60 )) s"
[ $status = 0 ] && rm -rf "$RESULTS" || echo "reports: $RESULTS"
exit $status
