#!/usr/bin/env bash
# On the GPU machine: build with CUDA (sm_90), run the host-mode suites there
# (a real driver and device are present), and take NVIDIA NCCL's single-GPU
# all_reduce_perf baseline with the same driver binary. Results go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export NCCL_SOCKET_IFNAME=lo PYTHONUNBUFFERED=1
python3 -m pip install -q --no-build-isolation . -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 2>&1 | tail -3
python3 -m accl.info | tee "$OUT/info.txt"
python3 -m pytest -q -x tests/native tests/faults tests/python -p no:cacheprovider 2>&1 | tail -15 | tee "$OUT/pytest.txt"
NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))")
cmake -S perf -B /tmp/bp -DNCCL_ROOT="$NCCL_LIB" > /dev/null && cmake --build /tmp/bp -j16 > /dev/null 2>&1
LD_LIBRARY_PATH="$NCCL_LIB" /tmp/bp/all_reduce_perf -b 8 -e 512M -f 4 -n 20 -w 5 2>&1 | tee "$OUT/nccl_allreduce.txt"
LD_LIBRARY_PATH="$(python3 -c 'import accl; print(accl.lib_dir())')" /tmp/bp/all_reduce_perf -b 8 -e 64M -f 4 -t 2 -n 20 -w 5 2>&1 | tee "$OUT/accl_host_allreduce.txt"
