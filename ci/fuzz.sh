#!/usr/bin/env bash
# The fuzzers (tests/fuzz: parsers, config, wire, frames, gate), each for SECONDS
# (default 60), in a build of their own (clang, libFuzzer, AddressSanitizer,
# UBSan; a few minutes on 2 cores the first time). First every file of
# tests/fuzz/corpus/<name>/ (seeds, and the inputs of past findings) is
# replayed; then the fuzzer runs from them. A crash, leak, sanitizer report
# or timeout is written to FINDINGS (default build/fuzz-findings) as
# <name>-crash-<sha1> and fails the script: keep it in the corpus once fixed.
# Usage: bash ci/fuzz.sh [SECONDS] [NAME...]
set -uo pipefail
cd "$(dirname "$0")/.."
EACH=${1:-60}
shift || true
NAMES=${*:-parsers config wire frames gate}
B=${ACCL_FUZZ_BUILD:-build/fuzz}
FINDINGS=${FINDINGS:-build/fuzz-findings}
mkdir -p "$B" "$FINDINGS"
command -v clang++ >/dev/null || { echo "ci/fuzz.sh: clang++ is needed (apt-get install clang)"; exit 2; }
if ! CC=clang CXX=clang++ cmake -S . -B "$B" -DACCL_FUZZ=ON -DACCL_CUDA=OFF -DACCL_BUILD_PERF=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$B/configure.log" 2>&1 ||
   ! cmake --build "$B" -j"$(nproc)" --target $(printf 'fuzz_%s ' $NAMES) > "$B/build.log" 2>&1; then
  tail -n 30 "$B/configure.log" "$B/build.log"
  echo "ci/fuzz.sh: the fuzzers did not build"
  exit 2
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export NCCL_DEBUG=NONE  # the refusals' WARN lines are what the inputs are for
failed=0
for name in $NAMES; do
  exe="$B/tests/fuzz/fuzz_$name"
  seeds="tests/fuzz/corpus/$name"
  work=$(mktemp -d)
  if ls "$seeds"/* >/dev/null 2>&1 && ! "$exe" "$seeds"/* > "$work/replay.log" 2>&1; then
    echo "fuzz_$name: a corpus input fails:"
    tail -n 30 "$work/replay.log"
    failed=1
    continue
  fi
  dirs=("$work/corpus")  # new units go to the first; the seeds are only read
  mkdir -p "$work/corpus"
  [ -d "$seeds" ] && dirs+=("$seeds")
  "$exe" -max_total_time="$EACH" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$FINDINGS/$name-" \
    -print_final_stats=1 "${dirs[@]}" > "$work/run.log" 2>&1
  rc=$?
  stats=$(grep -E "^stat::(number_of_executed_units|new_units_added|peak_rss_mb)" "$work/run.log" |
          sed 's/stat:://' | tr '\n' ' ')
  cov=$(grep -oE "cov: [0-9]+" "$work/run.log" | tail -1)
  if [ $rc -ne 0 ]; then
    echo "fuzz_$name: FOUND something (exit $rc) after ${EACH}s: $stats"
    grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$work/run.log" | head -10
    failed=1
  else
    echo "fuzz_$name: ${EACH}s, nothing found; $cov; $stats"
  fi
  rm -rf "$work"
done
exit $failed
