#!/usr/bin/env bash
# On the GPU machine, after `pip install --no-build-isolation .`: device
# buffers between two "hosts" (NCCL_HOSTID per process) on the one GPU under
# MPS, so that both libraries go through their network transport over
# loopback TCP: the same all_reduce_perf on NVIDIA's NCCL (its socket
# transport) and on ACCL (its TCP backend: by default, then with each of
# CONFIGS, ';'-separated settings of the ranks' environment), in turn,
# ROUNDS rounds. Tables go to $OUT, rows to stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
. ci/device_perf_drivers.sh
ARGS=${ARGS:--b 8 -e 256M -f 4 -n 10 -w 3 -c 0}
MPS=$(mktemp -d)
export CUDA_MPS_PIPE_DIRECTORY=$MPS/pipe CUDA_MPS_LOG_DIRECTORY=$MPS/log
export NCCL_NVLS_ENABLE=0 NCCL_IB_DISABLE=1 NCCL_NET=Socket
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d
one() {  # name, library dir, extra environment for the ranks (NAME=VALUE ...)
  local name=$1 lib=$2; shift 2
  local f="$OUT/$name.txt"
  LD_LIBRARY_PATH="$lib" timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_LIBRARY_PATH \
    -x NCCL_SOCKET_IFNAME -x CUDA_MPS_PIPE_DIRECTORY -x NCCL_NVLS_ENABLE -x NCCL_IB_DISABLE -x NCCL_NET sh -c \
    "NCCL_HOSTID=host\$OMPI_COMM_WORLD_RANK $* exec \"\$0\" \"\$@\"" /tmp/bp/all_reduce_perf $ARGS > "$f" 2>&1
  echo "### $name $* (rc $?)"
  grep -E "^ +[0-9]|WARN|rror" "$f" | head -16
}
for r in $(seq "${ROUNDS:-2}"); do
  one "nccl_r$r" "$NCCL_LIB"
  one "accl_r$r" "$ACCL_LIB"
  IFS=';' read -ra configs <<< "${CONFIGS:-NCCL_SOCKET_NTHREADS=2;NCCL_SOCKET_NTHREADS=4}"
  for i in "${!configs[@]}"; do
    one "accl_c${i}_r$r" "$ACCL_LIB" ${configs[$i]}
  done
done
echo quit | nvidia-cuda-mps-control
