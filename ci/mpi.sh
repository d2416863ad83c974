#!/usr/bin/env bash
# The mpirun correctness suite (docs/testing-mpi.md): every collective x
# datatype x op checked against MPI's own results, over shm and sockets, at
# N = 2, 3 and 4 ranks. Installs Open MPI and mpi4py if missing. Each run has
# a deadline, so CI cannot hang; exits non-zero on any failure.
# Usage: bash ci/mpi.sh [pytest args]      (ACCL_MPI_NP="2 3 4", ACCL_MPI_DEADLINE=240;
#   ACCL_RESULTS_DIR: where ci/test.sh's summary finds each run's report and status)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)

if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null; then
  $SUDO apt-get update -q && $SUDO apt-get install -y -q openmpi-bin libopenmpi-dev || exit 1
fi
"$PY" -c "import mpi4py" 2>/dev/null || "$PY" -m pip install -q mpi4py || exit 1
"$PY" -c "import accl, pytest, pytest_timeout, ml_dtypes" 2>/dev/null || {
  "$PY" -m pip install -q pytest pytest-timeout numpy ml_dtypes && "$PY" -m pip install -q ".[test]"; } || exit 1

MPIRUN=(mpirun -np)
EXTRA=()
if mpirun --version 2>/dev/null | grep -q "Open MPI"; then
  # --oversubscribe: more ranks than cores; op ^avx: Open MPI 4.1's AVX ops saturate
  # 8-bit integer sums (the reference would be wrong); loopback only.
  [ "$(id -u)" = 0 ] && EXTRA+=(--allow-run-as-root)
  EXTRA+=(--oversubscribe --mca op ^avx --mca btl self,vader,tcp --mca btl_tcp_if_include lo
          -x NCCL_SOCKET_IFNAME=lo -x PYTHON="$PY")
fi

status=0
for n in ${ACCL_MPI_NP:-2 3 4}; do
  logs=$(mktemp -d /tmp/accl-mpi-np$n.XXXXXX)
  echo "=== tests/mpi with $n ranks (other ranks' output: $logs) ==="
  start=$(date +%s)
  junit=()
  [ -n "${ACCL_RESULTS_DIR:-}" ] && junit=(-x ACCL_MPI_JUNIT="$ACCL_RESULTS_DIR/2$n-mpi-np$n.xml")
  timeout -k 10 "${ACCL_MPI_DEADLINE:-240}" mpirun "${EXTRA[@]}" -x ACCL_MPI_LOG_DIR="$logs" "${junit[@]}" -np "$n" \
    bash tests/mpi/rank.sh -q --color=no "$@"
  rc=$?
  echo "=== $n ranks: exit $rc in $(( $(date +%s) - start ))s ==="
  # ci/test.sh's summary: the exit status and the seconds, beside rank 0's report.
  [ -n "${ACCL_RESULTS_DIR:-}" ] && echo "$rc $(( $(date +%s) - start ))" >"$ACCL_RESULTS_DIR/2$n-mpi-np$n.rc"
  if [ $rc = 0 ]; then
    rm -rf "$logs"
  else
    status=1
    [ $rc = 124 ] && echo "=== $n ranks: deadline (${ACCL_MPI_DEADLINE:-240}s) passed, stopped ==="
    for f in "$logs"/rank*.log; do
      [ -f "$f" ] || continue
      echo "--- $(basename "$f" .log) (last 40 lines) ---"; tail -n 40 "$f"
    done
  fi
done
exit $status
