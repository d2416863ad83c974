#!/usr/bin/env bash
# On the GPU machine, after `python3 -m pip install --no-build-isolation .`:
# where the time of device buffers between two "hosts" (NCCL_HOSTID per
# process, loopback TCP, under MPS) goes. The same sizes in host mode (the
# network path alone, on malloc buffers), in device mode with staging chunks
# of CHUNKS bytes, and NVIDIA's NCCL over its socket transport.
set -uo pipefail
cd "$(dirname "$0")/.."
. ci/device_perf_drivers.sh
ARGS=${ARGS:--b 256K -e 256M -f 4 -n 10 -w 3 -c 0}
between_hosts_setup || exit 1
one() {  # name, library dir, driver, extra environment (NAME=VALUE ...)
  local name=$1 lib=$2 drv=$3; shift 3
  local f="$LOGS/$name.txt"
  LD_LIBRARY_PATH="$lib" timeout 200 mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_LIBRARY_PATH \
    -x NCCL_SOCKET_IFNAME -x CUDA_MPS_PIPE_DIRECTORY -x NCCL_NVLS_ENABLE -x NCCL_IB_DISABLE -x NCCL_NET sh -c \
    "NCCL_HOSTID=host\$OMPI_COMM_WORLD_RANK $* exec \"\$0\" \"\$@\"" "$drv" $ARGS >> "$f" 2>&1
  echo "### $name $* (rc $?)"
  grep -E "^ +[0-9]|WARN|rror" "$f" | awk '{print $1, $6, $8}' | tr '\n' ' '; echo
}
for r in $(seq "${ROUNDS:-1}"); do
  for coll in ${COLLS:-all_reduce sendrecv}; do
    one "host_$coll" "$ACCL_LIB" /tmp/bph/${coll}_perf ACCL_MODE=host
    one "nccl_$coll" "$NCCL_LIB" /tmp/bp/${coll}_perf
    for c in ${CHUNKS:-4194304 16777216 1048576}; do
      one "accl_${coll}_c$c" "$ACCL_LIB" /tmp/bp/${coll}_perf ACCL_STAGE_CHUNK_BYTES=$c
    done
  done
done
echo quit | nvidia-cuda-mps-control
tar czf "$OUT/netdiag_logs.tgz" -C "$LOGS" .
