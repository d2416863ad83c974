#!/usr/bin/env bash
# On the GPU machine, after `pip install --no-build-isolation .`: every
# collective with 2, 4 and 8 ranks of one process on the one GPU (-g N), at
# 64 and 256 MiB, against the bound of the bytes every rank must read and
# write over what a device-to-device copy moves in the same session
# (perf/tools/hbm_bound.py). Driver outputs go to $OUT, the tables to stdout.
# ARGS overrides the drivers' flags (no checks by default: -c 1 of 8 ranks at
# 256 MiB takes the host minutes), COLLS and RANKS what runs.
set -uo pipefail
cd "$(dirname "$0")/.."
. ci/device_perf_drivers.sh
# The copy's rate: cudaMemcpy of 256 MiB device to device, best of 20, read + write.
RATE=$(python3 - <<'PY'
import cupy as cp
n = 256 << 20
a, b = cp.ones(n, cp.uint8), cp.empty(n, cp.uint8)
s, e = cp.cuda.Event(), cp.cuda.Event()
best = None
for _ in range(23):
    s.record(); cp.cuda.runtime.memcpy(b.data.ptr, a.data.ptr, n, 3); e.record(); e.synchronize()
    t = cp.cuda.get_elapsed_time(s, e) / 1e3
    best = t if best is None or t < best else best
print(f"{2 * n / best:.4g}")
PY
)
echo "# $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); cudaMemcpy D2D 256 MiB moves $RATE B/s (read + write)"
ARGS=${ARGS:--b 64M -e 256M -f 4 -n 20 -w 5 -c 0}
for g in ${RANKS:-2 4 8}; do
  files=()
  for c in ${COLLS:-all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv gather scatter}; do
    f="$OUT/${c}_g$g.txt"
    LD_LIBRARY_PATH="$ACCL_LIB" timeout 120 /tmp/bp/${c}_perf $ARGS -g "$g" > "$f" 2>&1 || echo "# ${c}_perf -g $g: rc $?"
    grep -E "WARN|rror" "$f" | head -3
    files+=("$f")
  done
  python3 perf/tools/hbm_bound.py "$RATE" "$g" "${files[@]}"
done
