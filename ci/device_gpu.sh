#!/usr/bin/env bash
# On the GPU machine: build ACCL for sm_90 and run the device data path through
# the perf drivers, which check every result (#wrong) against their own
# reference: several ranks on the one GPU (-g N: one thread, grouped calls;
# -t N: one thread per rank), every datatype and op, CUDA graphs, and the
# 1-rank comparison with NVIDIA's NCCL (same binary, chosen by library path).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export NCCL_SOCKET_IFNAME=lo PYTHONUNBUFFERED=1
log() { echo "### $*" | tee -a "$OUT/summary.txt"; }
# QUICK=1: a smoke run (small sizes, short deadlines) before the full one.
QUICK=${QUICK:-0}
export CMAKE_BUILD_PARALLEL_LEVEL=16
( time python3 -m pip install -v --no-build-isolation . -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
    -C cmake.define.ACCL_DEVICE_KERNELS=ON ) > "$OUT/build.txt" 2>&1
tail -4 "$OUT/build.txt"
python3 -m accl.info | tee "$OUT/info.txt"
NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))")
ACCL_LIB=$(python3 -c 'import accl; print(accl.lib_dir())')
cmake -S perf -B /tmp/bp -DNCCL_ROOT="$NCCL_LIB" > /dev/null && cmake --build /tmp/bp -j16 > /dev/null 2>&1
run() {  # name, timeout, command...
  local name=$1 t=$2; shift 2
  log "$name: $*"
  LD_LIBRARY_PATH="$ACCL_LIB" ACCL_TIMEOUT=${ACCL_TIMEOUT:-60} timeout "$t" "$@" > "$OUT/$name.txt" 2>&1
  local rc=$?
  grep -E "Avg bus|wrong|WARN|rror" "$OUT/$name.txt" | sort | uniq -c | head -8 | tee -a "$OUT/summary.txt"
  log "$name rc=$rc"
}
# The smoke run, always first; QUICK=1 stops after it.
run_quick() {
  run q_allreduce_g1 30 /tmp/bp/all_reduce_perf -b 8 -e 1M -f 32 -g 1 -c 1 -n 2 -w 1
  for d in all_reduce all_gather broadcast reduce reduce_scatter sendrecv; do
    run "q_${d}_g2" 40 /tmp/bp/${d}_perf -b 8 -e 4M -f 16 -g 2 -c 1 -n 2 -w 1
  done
  run q_allreduce_t2 40 /tmp/bp/all_reduce_perf -b 8 -e 4M -f 16 -t 2 -c 1 -n 2 -w 1
}
ACCL_TIMEOUT=15 run_quick
[ "$QUICK" = 1 ] && exit 0
# Most telling first: a device call's output is kept when it runs out of time.
run types_allreduce_g2 150 /tmp/bp/all_reduce_perf -b 8 -e 1M -f 32 -g 2 -c 1 -n 2 -w 1 -d all -o all
run bw_allreduce_g2 90 /tmp/bp/all_reduce_perf -b 64M -e 1G -f 4 -g 2 -c 0 -n 10 -w 3
log "1 rank: NCCL"
LD_LIBRARY_PATH="$NCCL_LIB" timeout 90 /tmp/bp/all_reduce_perf -b 8 -e 512M -f 4 -n 20 -w 5 > "$OUT/nccl_1rank.txt" 2>&1
run accl_1rank 90 /tmp/bp/all_reduce_perf -b 8 -e 512M -f 4 -n 20 -w 5
run allreduce_t8 90 /tmp/bp/all_reduce_perf -b 8 -e 64M -f 8 -t 8 -c 1 -n 3 -w 1
run graph_g2 60 /tmp/bp/all_reduce_perf -b 8 -e 8M -f 16 -g 2 -c 1 -G 5 -n 2 -w 1
run alltoall_g4 60 /tmp/bp/alltoall_perf -b 64 -e 8M -f 16 -g 4 -c 1 -n 3 -w 1
run types_rs_g4 150 /tmp/bp/reduce_scatter_perf -b 64 -e 1M -f 64 -g 4 -c 1 -n 2 -w 1 -d all -o all
run bw_allreduce_g8 90 /tmp/bp/all_reduce_perf -b 64M -e 1G -f 4 -g 8 -c 0 -n 10 -w 3
for g in 2 4; do
  for d in all_reduce all_gather broadcast reduce reduce_scatter sendrecv; do
    run "${d}_g$g" 60 /tmp/bp/${d}_perf -b 8 -e 32M -f 8 -g $g -c 1 -n 3 -w 1
  done
done
