#!/usr/bin/env bash
# On the GPU machine, after `python3 -m pip install --no-build-isolation .`:
# two "hosts" (NCCL_HOSTID per process, loopback TCP, under MPS), the wire
# first (plain TCP streams, one way and both ways at once), then each of
# RUNS (';'-separated, each "<kind> [NAME=VALUE ...]", kind one of host:
# ACCL on malloc buffers, dev: ACCL on device buffers, nccl: NVIDIA's NCCL)
# with the same all_reduce_perf ARGS, ROUNDS rounds. Where `perf` is
# installed, PROFILE (one run's words) is also profiled. Rows to stdout,
# logs to $OUT/netmatrix_logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
. ci/device_perf_drivers.sh
ARGS=${ARGS:--b 8 -e 256M -f 8 -n 10 -w 3 -c 0}
COLL=${COLL:-all_reduce}
between_hosts_setup || exit 1

# The wire: plain TCP streams over loopback, 1 MiB writes, 3 s.
wire() {  # both (0/1)
  python3 - "$1" <<'EOF'
import socket, sys, threading, time
both = sys.argv[1] == "1"
def recv(srv, out):
    c, _ = srv.accept(); b = bytearray(1 << 20); n = c.recv_into(b); t = time.monotonic(); tot = n
    while n: n = c.recv_into(b); tot += n
    out.append(tot / (time.monotonic() - t) / 1e9)
def send(port):
    c = socket.create_connection(("127.0.0.1", port)); b = bytes(1 << 20); end = time.monotonic() + 3
    while time.monotonic() < end: c.sendall(b)
    c.close()
import multiprocessing as mp
def side(port, q):
    s = socket.socket(); s.bind(("127.0.0.1", port)); s.listen(); out = []
    th = threading.Thread(target=recv, args=(s, out)); th.start(); q.put("ready"); th.join(); q.put(out[0])
ports = [41000, 41001][: 2 if both else 1]
qs = [mp.Queue() for _ in ports]
ps = [mp.Process(target=side, args=(p, q)) for p, q in zip(ports, qs)]
[p.start() for p in ps]; [q.get() for q in qs]
ss = [mp.Process(target=send, args=(p,)) for p in ports]
[s.start() for s in ss]; [s.join() for s in ss]
print("wire GB/s per stream (%s):" % ("both ways" if both else "one way"), " ".join("%.2f" % q.get() for q in qs))
EOF
}
wire 0; wire 1

one() {  # tag, kind, extra environment (NAME=VALUE ...)
  local tag=$1 kind=$2; shift 2
  local lib=$ACCL_LIB drv=/tmp/bp/${COLL}_perf env="$*"
  case $kind in
    host) drv=/tmp/bph/${COLL}_perf env="ACCL_MODE=host $env" ;;
    nccl) lib=$NCCL_LIB ;;
  esac
  local f="$LOGS/$tag.txt"
  LD_LIBRARY_PATH="$lib" timeout 200 mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_LIBRARY_PATH \
    -x NCCL_SOCKET_IFNAME -x CUDA_MPS_PIPE_DIRECTORY -x NCCL_NVLS_ENABLE -x NCCL_IB_DISABLE -x NCCL_NET sh -c \
    "NCCL_HOSTID=host\$OMPI_COMM_WORLD_RANK $env exec \"\$0\" \"\$@\"" "$drv" $ARGS > "$f" 2>&1
  echo "### $tag $kind $* (rc $?)"
  grep -E "^ +[0-9]|WARN|rror" "$f" | awk '{print $1, $6, $8, $9}' | tr '\n' ' '; echo
}
IFS=';' read -ra runs <<< "${RUNS:-nccl;host;dev}"
for r in $(seq "${ROUNDS:-1}"); do
  for i in "${!runs[@]}"; do one "r${r}_$i" ${runs[$i]}; done
done
if command -v perf > /dev/null && [ -n "${PROFILE:-}" ]; then
  ARGS="-b 16M -e 16M -n 400 -w 3 -c 0" one profiled $PROFILE &
  sleep 6; perf record -a -g -o /tmp/perf.data -- sleep 4 > /dev/null 2>&1; wait
  perf report -i /tmp/perf.data --no-children -g none -s comm,sym 2>/dev/null | grep "%" | head -40
else
  echo "no perf here (or no PROFILE)"
fi
echo quit | nvidia-cuda-mps-control
tar czf "$OUT/netmatrix_logs.tgz" -C "$LOGS" .
