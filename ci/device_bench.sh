#!/usr/bin/env bash
# On the GPU machine, after `pip install --no-build-isolation .`: the bandwidth
# and latency of several ranks on the one GPU (direct collectives of one
# process, the ring with ACCL_DIRECT=0 and between processes, processes under
# MPS on plain buffers and on symmetric windows) and of device
# buffers between "hosts" (NCCL_HOSTID per process: staged through pinned host
# memory). Tables go to $OUT (default /tmp/out), a summary to stdout.
# ONLY=mps runs the processes under MPS alone.
set -uo pipefail
cd "$(dirname "$0")/.."
. ci/device_perf_drivers.sh
bench() {  # name, then the command (the library is ACCL's)
  local name=$1; shift
  LD_LIBRARY_PATH="$ACCL_LIB" timeout 120 "$@" > "$OUT/$name.txt" 2>&1
  echo "### $name (rc $?): $*"
  grep -vE "^#  *(nThread|Using|Rank|  *size|  *\(B\))|^# *$" "$OUT/$name.txt" | grep -E "^ +[0-9]|Avg|WARN|rror" | head -20
}
BW="-b 1M -e 256M -f 4 -n 10 -w 3 -c 0"
if [ "${ONLY:-all}" = all ]; then
bench ar_g2_direct /tmp/bp/all_reduce_perf $BW -g 2
ACCL_DIRECT=0 bench ar_g2_ring /tmp/bp/all_reduce_perf $BW -g 2
bench ar_g4_direct /tmp/bp/all_reduce_perf -b 64M -e 256M -f 4 -n 10 -w 3 -c 0 -g 4
bench ar_g8_direct /tmp/bp/all_reduce_perf -b 64M -e 256M -f 4 -n 10 -w 3 -c 0 -g 8
for d in all_gather reduce_scatter broadcast reduce; do
  bench "${d}_g2_direct" /tmp/bp/${d}_perf -b 64M -e 256M -f 4 -n 10 -w 3 -c 0 -g 2
done
bench lat_g2_direct /tmp/bp/all_reduce_perf -b 8 -e 64K -f 8 -n 50 -w 10 -c 0 -g 2
bench lat_t2_direct /tmp/bp/all_reduce_perf -b 8 -e 64K -f 8 -n 50 -w 10 -c 0 -t 2
# Between processes on the one GPU (CUDA IPC connectors), and between "hosts".
bench ar_np2_ring mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x NCCL_SOCKET_IFNAME \
  /tmp/bp/all_reduce_perf -b 8 -e 256M -f 8 -n 10 -w 3 -c 0
bench ar_np2_hosts mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x NCCL_SOCKET_IFNAME sh -c \
  'NCCL_HOSTID=host$OMPI_COMM_WORLD_RANK exec "$0" "$@"' /tmp/bp/all_reduce_perf -b 8 -e 256M -f 8 -n 10 -w 3 -c 0
ACCL_MODE=host bench ar_np2_hosts_hostbuf mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH -x NCCL_SOCKET_IFNAME \
  -x ACCL_MODE sh -c 'NCCL_HOSTID=host$OMPI_COMM_WORLD_RANK exec "$0" "$@"' /tmp/bp/all_reduce_perf -b 8 -e 256M -f 8 \
  -n 10 -w 3 -c 0
fi
# Processes under MPS (a private daemon), where their kernels run at once: the
# ring on plain buffers, and the direct collectives on buffers in symmetric
# windows (-R 2: ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC))
# and on registered buffers (-R 1: ncclCommRegister).
if command -v nvidia-cuda-mps-control > /dev/null; then
  MPS=$(mktemp -d)
  export CUDA_MPS_PIPE_DIRECTORY=$MPS/pipe CUDA_MPS_LOG_DIRECTORY=$MPS/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d
  MPI=(mpirun --allow-run-as-root --oversubscribe -x LD_LIBRARY_PATH -x NCCL_SOCKET_IFNAME -x CUDA_MPS_PIPE_DIRECTORY)
  bench ar_np2_mps_ring "${MPI[@]}" -np 2 /tmp/bp/all_reduce_perf $BW
  bench ar_np2_mps_win "${MPI[@]}" -np 2 /tmp/bp/all_reduce_perf $BW -R 2
  for np in 4 8; do
    bench "ar_np${np}_mps_win" "${MPI[@]}" -np $np /tmp/bp/all_reduce_perf -b 64M -e 256M -f 4 -n 10 -w 3 -c 0 -R 2
  done
  for d in all_gather reduce_scatter broadcast reduce; do
    bench "${d}_np2_mps_win" "${MPI[@]}" -np 2 /tmp/bp/${d}_perf -b 64M -e 256M -f 4 -n 10 -w 3 -c 0 -R 2
  done
  bench lat_np2_mps_win "${MPI[@]}" -np 2 /tmp/bp/all_reduce_perf -b 8 -e 64K -f 8 -n 50 -w 10 -c 0 -R 2
  bench ar_np2_mps_reg "${MPI[@]}" -np 2 /tmp/bp/all_reduce_perf $BW -R 1
  for np in 4 8; do
    bench "ar_np${np}_mps_reg" "${MPI[@]}" -np $np /tmp/bp/all_reduce_perf -b 64M -e 256M -f 4 -n 10 -w 3 -c 0 -R 1
  done
  for d in all_gather reduce_scatter broadcast reduce; do
    bench "${d}_np2_mps_reg" "${MPI[@]}" -np 2 /tmp/bp/${d}_perf -b 64M -e 256M -f 4 -n 10 -w 3 -c 0 -R 1
  done
  bench lat_np2_mps_reg "${MPI[@]}" -np 2 /tmp/bp/all_reduce_perf -b 8 -e 64K -f 8 -n 50 -w 10 -c 0 -R 1
  bench lat_np2_mps_ring "${MPI[@]}" -np 2 /tmp/bp/all_reduce_perf -b 8 -e 64K -f 8 -n 50 -w 10 -c 0
  echo quit | nvidia-cuda-mps-control
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi
