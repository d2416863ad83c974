#!/usr/bin/env bash
# On the GPU machine, after ci/device_gpu.sh built the drivers in /tmp/bp: the
# runs named on the command line (name: driver args), output kept in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
ACCL_LIB=$(python3 -c 'import accl; print(accl.lib_dir())')
for spec in "$@"; do
  name=${spec%%:*}; args=${spec#*:}
  echo "### $name: $args"
  LD_LIBRARY_PATH="$ACCL_LIB" NCCL_SOCKET_IFNAME=lo ACCL_TIMEOUT=${ACCL_TIMEOUT:-20} timeout 90 $args > "$OUT/$name.txt" 2>&1
  echo "rc=$?"; grep -v "^#  *Rank\|^#$" "$OUT/$name.txt" | tail -${TAILN:-14}
done
