#!/usr/bin/env bash
# On the 16-core GPU machine, after `pip install --no-build-isolation .`: host
# mode between 2 processes bound to their own cores, the direct collectives
# (cross memory attach) against the ring (ACCL_DIRECT=0) and OpenMPI's own C
# loop (perf/tools/mpi_coll.c), alternating, ROUNDS times, on the drivers'
# malloc buffers (small pages) and with glibc's huge pages. This machine has
# no VM between its cores, so it settles where the direct path should start
# (docs/perf.md, "small pages"). Tables go to $OUT, a summary to stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
ACCL_LIB=$(python3 -c 'import accl; print(accl.lib_dir())')
cmake -S perf -B /tmp/bph -DNCCL_ROOT="$ACCL_LIB" -DACCL_PERF_CUDA=OFF -DCMAKE_BUILD_TYPE=Release > /dev/null &&
  cmake --build /tmp/bph -j"$(nproc)" > /dev/null 2>&1 || { echo "perf drivers did not build"; exit 1; }
MPI=(mpirun --allow-run-as-root -np 2 --bind-to core -x LD_LIBRARY_PATH -x ACCL_DIRECT -x GLIBC_TUNABLES
     -x ACCL_MODE=host -x NCCL_SOCKET_IFNAME=lo)
SIZES="-b 256K -e 16M -f 4"
rows() { grep -E "^ +[0-9]+ " "$1" | awk '{printf "%s:%s ", $1, $6}'; echo; }
for round in $(seq "${ROUNDS:-3}"); do
  for pages in small huge; do
    tun=""; [ $pages = huge ] && tun=glibc.malloc.hugetlb=1
    for coll in all_reduce reduce broadcast all_gather reduce_scatter; do
      for d in 1 0; do
        f="$OUT/r${round}_${pages}_${coll}_d$d.txt"
        ACCL_DIRECT=$d GLIBC_TUNABLES=$tun LD_LIBRARY_PATH="$ACCL_LIB" timeout 120 "${MPI[@]}" \
          /tmp/bph/${coll}_perf $SIZES -n 40 -w 5 -c 0 > "$f" 2>&1
        echo "$round $pages $coll direct=$d: $(rows "$f")"
      done
      m=$(echo $coll | sed 's/all_reduce/allreduce/;s/broadcast/bcast/;s/all_gather/allgather/;s/reduce_scatter/reducescatter/')
      GLIBC_TUNABLES=$tun timeout 120 mpirun --allow-run-as-root -np 2 --bind-to core -x GLIBC_TUNABLES \
        /tmp/bph/mpi_coll $m 256K 16M > "$OUT/r${round}_${pages}_${coll}_mpi.txt" 2>&1
      echo "$round $pages $coll mpi: $(grep -E '^ +[0-9]' "$OUT/r${round}_${pages}_${coll}_mpi.txt" | awk '{printf "%s:%s ", $1, $2}')"
    done
  done
done
