#!/usr/bin/env bash
# On the GPU machine: the pending direct-send patch
# (docs/pending/p2p-three-pass.patch) against the tree without it, so that one
# or two device calls settle whether it lands.
#   bash ci/device_p2p_ab.sh [build] [test] [perf]    (default: all three)
# build: the library of this tree as it is (cmake, in /tmp/before), then the
#        patch applied to this copy of the tree and installed (pip, for the
#        tests); stamps in /tmp make a second call skip it.
# test:  the GPU tests that the patch touches (point-to-point, alltoall,
#        gather, scatter, size mismatches, the soak).
# perf:  sendrecv, alltoall, gather and scatter at 2, 4 and 8 ranks of one
#        process from 64 to 256 MiB, alternating the two libraries; the first
#        round checks every result (-c 1).
# Logs and tables go to $OUT (default /tmp/out), a summary to stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export NCCL_SOCKET_IFNAME=lo ACCL_TIMEOUT=60 PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL=16
STAGES=${*:-build test perf}
PATCH=docs/pending/p2p-three-pass.patch
BEFORE=/tmp/before

has() { [[ " $STAGES " == *" $1 "* ]]; }

if has build && [ ! -e /tmp/p2p-ab-built ]; then
  # The library without the patch, from a copy of the sources (the patch
  # taken out if an earlier call put it in), built while pip builds the
  # patched tree.
  rm -rf /tmp/before-src && mkdir -p /tmp/before-src &&
    tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C /tmp/before-src || exit 1
  if (cd /tmp/before-src && git apply --check -R "$PATCH" 2> /dev/null); then
    (cd /tmp/before-src && git apply -R "$PATCH") || exit 1
  fi
  ( cmake -S /tmp/before-src -B "$BEFORE" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DACCL_CUDA=ON &&
      cmake --build "$BEFORE" -j"$(nproc)" --target nccl ) > "$OUT/build_before.txt" 2>&1 &
  before=$!
  if git apply --check -R "$PATCH" 2> /dev/null; then
    echo "the patch is already applied"
  else
    git apply "$PATCH" || { echo "the patch does not apply"; exit 1; }
  fi
  python3 -m pip install -v --no-build-isolation . -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
    -C cmake.define.ACCL_DEVICE_KERNELS=ON > "$OUT/build_after.txt" 2>&1 || { tail -30 "$OUT/build_after.txt"; exit 1; }
  wait "$before" || { tail -30 "$OUT/build_before.txt"; exit 1; }
  touch /tmp/p2p-ab-built
  echo "built: $BEFORE (without the patch) and the installed package (with it)"
fi

if has test; then
  timeout -k 10 200 python3 -m pytest -q -p no:cacheprovider -rfE --durations=5 tests/gpu/test_c_api_cupy.py \
    2>&1 | tee "$OUT/pytest_c_api.txt" | tail -8
  echo "pytest rc=${PIPESTATUS[0]}"
  timeout -k 10 300 python3 -m pytest -q -p no:cacheprovider -rfE --durations=5 tests/gpu/test_device_perf.py \
    -k "large_point_to_point or init_warns or (test_collective and (sendrecv or alltoall or gather or scatter))" \
    2>&1 | tee "$OUT/pytest_perf.txt" | tail -8
  echo "pytest rc=${PIPESTATUS[0]}"
fi

if has perf; then
  AFTER=$(python3 -c 'import accl; print(accl.lib_dir())')
  NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))")
  cmake -S perf -B /tmp/bp -DNCCL_ROOT="$NCCL_LIB" -DACCL_PERF_CUDA=ON > /dev/null &&
    cmake --build /tmp/bp -j"$(nproc)" > /dev/null 2>&1 || { echo "perf drivers did not build"; exit 1; }
  for round in 1 2; do
    check=$([ $round = 1 ] && echo 1 || echo 0)
    for coll in sendrecv alltoall gather scatter; do
      for g in 2 4 8; do
        for which in before after; do
          lib=$([ $which = before ] && echo "$BEFORE" || echo "$AFTER")
          f="$OUT/${coll}_g${g}_${which}_r${round}.txt"
          LD_LIBRARY_PATH="$lib" timeout 120 /tmp/bp/${coll}_perf -b 64M -e 256M -f 4 -n 10 -w 3 -c $check -g $g \
            > "$f" 2>&1
          rc=$?
          # size, out-of-place time (us) and #wrong, per row
          printf '%-9s g%s %-6s r%s rc %s: %s\n' "$coll" "$g" "$which" "$round" "$rc" \
            "$(awk '/^ +[0-9]+ +[0-9]+/ {printf "%s %s us (%s wrong)  ", $1, $6, $9}' "$f")"
        done
      done
    done
  done
fi
