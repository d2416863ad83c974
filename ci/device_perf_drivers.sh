# Sourced by the device scripts (from the checkout's top level): $OUT made,
# the environment the drivers run with, the two libraries' directories
# ($ACCL_LIB, and $NCCL_LIB from the nvidia-nccl-cu13 wheel), and the perf
# drivers built against NCCL in /tmp/bp (LD_LIBRARY_PATH picks the library).
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export NCCL_SOCKET_IFNAME=lo ACCL_TIMEOUT=60
NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))")
ACCL_LIB=$(python3 -c 'import accl; print(accl.lib_dir())')
cmake -S perf -B /tmp/bp -DNCCL_ROOT="$NCCL_LIB" -DACCL_PERF_CUDA=ON > /dev/null &&
  cmake --build /tmp/bp -j"$(nproc)" > /dev/null 2>&1 || { echo "perf drivers did not build"; exit 1; }
# Two "hosts" on this one GPU (the network scripts): the drivers built
# against ACCL for host buffers in /tmp/bph, MPS started (stop it with `echo
# quit | nvidia-cuda-mps-control`), the socket transport for NCCL, and $LOGS.
between_hosts_setup() {
  cmake -S perf -B /tmp/bph -DNCCL_ROOT="$ACCL_LIB" -DACCL_PERF_CUDA=OFF -DCMAKE_BUILD_TYPE=Release > /dev/null &&
    cmake --build /tmp/bph -j"$(nproc)" > /dev/null 2>&1 || { echo "host perf drivers did not build"; return 1; }
  MPS=$(mktemp -d)
  export CUDA_MPS_PIPE_DIRECTORY=$MPS/pipe CUDA_MPS_LOG_DIRECTORY=$MPS/log
  export NCCL_NVLS_ENABLE=0 NCCL_IB_DISABLE=1 NCCL_NET=Socket
  LOGS=$(mktemp -d)
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d
}
