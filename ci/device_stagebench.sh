#!/usr/bin/env bash
# On the GPU machine, after `pip install --no-build-isolation .`: device
# buffers between two "hosts" (NCCL_HOSTID per process) on the one GPU, staged
# whole (ACCL_STAGE_CHUNK_BYTES=0) and in chunks (CHUNKS, default 4 MiB and
# 1 MiB), in turn, ROUNDS rounds, under MPS (the processes' kernels run side
# by side, as on two hosts with a GPU each). Tables go to $OUT, the rows to stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
. ci/device_perf_drivers.sh
ARGS=${ARGS:--b 4M -e 256M -f 4 -n 5 -w 2 -c 0}
MPS=$(mktemp -d)
export CUDA_MPS_PIPE_DIRECTORY=$MPS/pipe CUDA_MPS_LOG_DIRECTORY=$MPS/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d
for r in $(seq "${ROUNDS:-2}"); do
  for c in 0 ${CHUNKS:-4194304 1048576}; do
    for coll in ${COLLS:-all_reduce all_gather}; do
      f="$OUT/${coll}_chunk${c}_r$r.txt"
      LD_LIBRARY_PATH="$ACCL_LIB" timeout 200 mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_LIBRARY_PATH \
        -x NCCL_SOCKET_IFNAME -x CUDA_MPS_PIPE_DIRECTORY -x ACCL_STAGE_CHUNK_BYTES="$c" sh -c \
        'NCCL_HOSTID=host$OMPI_COMM_WORLD_RANK exec "$0" "$@"' /tmp/bp/${coll}_perf $ARGS > "$f" 2>&1
      echo "### $coll, ACCL_STAGE_CHUNK_BYTES=$c, round $r (rc $?)"
      grep -E "^ +[0-9]|WARN|rror" "$f" | head -12
    done
  done
done
echo quit | nvidia-cuda-mps-control
