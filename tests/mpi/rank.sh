#!/usr/bin/env bash
# One MPI rank of the suite: rank 0 prints pytest's output, the other ranks
# write theirs to $ACCL_MPI_LOG_DIR/rank<R>.log (shown by ci/mpi.sh on failure).
# Usage: mpirun ... bash tests/mpi/rank.sh [pytest args]
R=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-0}}}
PY=${PYTHON:-python3}
ARGS=(-m pytest -p no:cacheprovider tests/mpi "$@")
if [ "$R" = 0 ]; then
  # ci/test.sh's summary reads rank 0's report.
  [ -n "${ACCL_MPI_JUNIT:-}" ] && ARGS+=(--junitxml="$ACCL_MPI_JUNIT")
  exec "$PY" "${ARGS[@]}"
fi
mkdir -p "${ACCL_MPI_LOG_DIR:=/tmp/accl-mpi-logs}"
exec "$PY" "${ARGS[@]}" -q >"$ACCL_MPI_LOG_DIR/rank$R.log" 2>&1
