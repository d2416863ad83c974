#!/usr/bin/env bash
# On the GPU machine: build ACCL for sm_90 once per machine (a stamp in /tmp),
# then run GPU tests within a time limit (SIGINT at the limit: pytest still
# prints its summary), so that one device call of at most
# 10 minutes holds the build and a part of tests/gpu. Logs go to $OUT.
#   bash ci/device_pytest.sh SECONDS [pytest arguments...]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export NCCL_SOCKET_IFNAME=lo PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL=16
limit=$1; shift
stamp=/tmp/accl-built-$(git rev-parse --short HEAD 2>/dev/null || echo tree)
if [ ! -e "$stamp" ]; then
  ( time python3 -m pip install -v --no-build-isolation . -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
      -C cmake.define.ACCL_DEVICE_KERNELS=ON ) > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
  grep -E "^(real|user)" "$OUT/build.txt"
  python3 -m accl.info | grep -i mode
  touch "$stamp"
fi
timeout -s INT -k 20 "$limit" python3 -m pytest -q -p no:cacheprovider -rfE --durations=8 "$@" 2>&1 | tee -a "$OUT/pytest.txt"
echo "pytest rc=${PIPESTATUS[0]}"
