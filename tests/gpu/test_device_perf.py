"""The CUDA executor through the perf drivers, on device buffers: several ranks
on one GPU as one thread's grouped calls (-g N) and as one thread per rank
(-t N), every datatype and op, CUDA graphs. The drivers check every result
against their own reference (#wrong); the table must be clean."""
import os
import shutil
import subprocess

import pytest
from nccl_table import Table

import accl

COLLS = ["all_reduce", "all_gather", "broadcast", "reduce", "reduce_scatter", "alltoall", "gather", "scatter",
         "sendrecv"]


def run(drivers, name, *args, timeout=180, **extra_env):
    env = dict(os.environ, NCCL_SOCKET_IFNAME="lo", ACCL_TIMEOUT="60", LD_LIBRARY_PATH=accl.lib_dir(), **extra_env)
    p = subprocess.run([str(drivers / f"{name}_perf"), *map(str, args), "-T", "120"], capture_output=True, text=True,
                       timeout=timeout, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    t = Table(p.stdout)
    t.assert_clean()
    t.log = p.stderr
    return t


@pytest.mark.parametrize("ranks", [["-g", "2"], ["-g", "3"], ["-t", "2"], ["-t", "2", "-g", "2"]],
                         ids=["g2", "g3", "t2", "t2g2"])
@pytest.mark.parametrize("name", COLLS)
def test_collective(drivers, name, ranks):
    t = run(drivers, name, "-b", "8", "-e", "8M", "-f", "8", "-n", "2", "-w", "1", "-c", "1", *ranks)
    assert len(t.rows) == 7


@pytest.mark.parametrize("name", ["all_reduce", "reduce", "reduce_scatter", "broadcast", "all_gather"])
def test_every_type_and_op(drivers, name):
    args = ["-b", "4", "-e", "1M", "-f", "64", "-n", "1", "-w", "0", "-c", "1", "-g", "2", "-d", "all"]
    if name in ("all_reduce", "reduce", "reduce_scatter"):
        args += ["-o", "all"]
    if name in ("reduce", "broadcast"):
        args += ["-r", "all"]
    run(drivers, name, *args, timeout=300)


@pytest.mark.parametrize("name", ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "alltoall",
                                  "gather", "scatter"])
def test_ring_in_one_process(drivers, name):
    # Ranks of one process on one GPU take the direct algorithm; ACCL_DIRECT=0
    # keeps them on the ring (what ranks in separate processes use), and
    # all-to-all, gather and scatter on sends and receives.
    args = ["-b", "4", "-e", "4M", "-f", "32", "-n", "1", "-w", "0", "-c", "1", "-g", "3", "-d", "all"]
    if name in ("all_reduce", "reduce", "reduce_scatter"):
        args += ["-o", "all"]
    run(drivers, name, *args, timeout=300, ACCL_DIRECT="0")


def test_unaligned_counts(drivers):
    # Counts that leave a tail after the 16-byte vectors and uneven channel slices.
    run(drivers, "all_reduce", "-b", "3", "-e", "3000003", "-f", "10", "-n", "1", "-w", "0", "-c", "1", "-g", "3",
        "-d", "int8")


@pytest.mark.parametrize("name", ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"])
def test_direct_large(drivers, name):
    # Parts of 8 MiB and more per rank take the evict-first stores
    # (device/dev_direct.cuh): odd sizes that leave a tail after the 16-byte
    # vectors, 2 and 3 ranks, then replays of a captured graph.
    for ranks in ("2", "3"):
        run(drivers, name, "-b", "50000004", "-e", "100000008", "-f", "2", "-n", "2", "-w", "1", "-c", "1", "-g", ranks,
            "-d", "float")
    run(drivers, name, "-b", "96M", "-e", "96M", "-n", "3", "-w", "1", "-c", "1", "-g", "2", "-G", "3", "-d", "int8")


@pytest.mark.parametrize("direct", ["1", "0"], ids=["direct", "slots"])
@pytest.mark.parametrize("name", ["sendrecv", "alltoall", "gather", "scatter"])
def test_large_point_to_point(drivers, name, direct):
    # Sends and receives larger than their channels' slots hold (16 MiB per
    # peer at 2 ranks, 7 at 3, on an H200 with the default NCCL_BUFFSIZE)
    # copy between the buffers of ranks of one process on one GPU;
    # ACCL_P2P_DIRECT=0 keeps them on the slots. Sizes from below to above
    # that, then replays of a captured graph; the INIT line says how many
    # peers may copy directly (every rank on GPU 0).
    # ACCL_DIRECT=0: all-to-all, gather and scatter as sends and receives, not
    # as direct collectives.
    env = dict(ACCL_P2P_DIRECT=direct, ACCL_DIRECT="0", NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT",
               CUDA_VISIBLE_DEVICES="0")
    for ranks in (["-g", "2"], ["-g", "3"], ["-t", "2"]):
        t = run(drivers, name, "-b", "6M", "-e", "96M", "-f", "4", "-n", "2", "-w", "1", "-c", "1", *ranks, **env)
        peers = int(ranks[-1]) - 1 if direct == "1" else 0
        assert f"copy directly with {peers} rank(s) of this process" in t.log, t.log[-3000:]
    run(drivers, name, "-b", "50000000", "-e", "50000000", "-n", "3", "-w", "1", "-c", "1", "-g", "2", "-G", "3",
        "-d", "int8", ACCL_P2P_DIRECT=direct, ACCL_DIRECT="0", CUDA_VISIBLE_DEVICES="0")


@pytest.mark.parametrize("name", ["alltoall", "gather", "scatter"])
def test_direct_send_recv_collectives(drivers, name):
    # Ranks of one process on one GPU run all-to-all, gather and scatter as
    # direct collectives: each pair of ranks swaps its two blocks of an
    # all-to-all, half each (in place, a swap of the very bytes; the driver
    # runs both placements), and each rank moves its own block of a gather or
    # scatter. 2 to 8 ranks, grouped and a thread each, blocks from a few
    # bytes to 64 MiB, every root at 3 ranks; blocks that are no multiple of
    # 16 bytes (the byte loop); then replays of a captured graph.
    roots = ["-r", "all"] if name != "alltoall" else []
    for ranks in (["-g", "2"], ["-g", "3", *roots], ["-g", "4"], ["-g", "8"], ["-t", "3"]):
        run(drivers, name, "-b", "8", "-e", "128M", "-f", "16", "-n", "2", "-w", "1", "-c", "1", *ranks)
    run(drivers, name, "-b", "3000003", "-e", "3000003", "-n", "2", "-w", "1", "-c", "1", "-g", "3", "-d", "int8",
        *roots)
    run(drivers, name, "-b", "96M", "-e", "96M", "-n", "3", "-w", "1", "-c", "1", "-g", "4", "-G", "3")


def test_cuda_graphs(drivers):
    run(drivers, "all_reduce", "-b", "8", "-e", "8M", "-f", "16", "-n", "2", "-w", "1", "-c", "1", "-g", "2", "-G", "5")


@pytest.mark.parametrize("name", ["all_reduce", "reduce", "gather", "scatter", "alltoall", "all_gather", "sendrecv"])
def test_group_launch(drivers, name):
    # -g 4: one thread's group holds a call of each of four ranks, each on its
    # own stream: they run as one launch (coll/dev_coll.cc devRunTogether;
    # sendrecv's ring too, a permutation of the ranks' buffers),
    # and ACCL_GROUP_LAUNCH=0 launches per rank; both check every result,
    # at sizes with a tail after the 16-byte vectors, in place and not. -G
    # captures each stream into a graph of its own: launches per rank there
    # (its eager warm-up runs as one launch).
    args = ["-b", "4", "-e", "50000004", "-f", "20", "-n", "2", "-w", "1", "-c", "1", "-g", "4", "-d", "int32"]
    if name in ("all_reduce", "reduce"):
        args += ["-o", "all"]
    line = "runs as one launch on this rank's stream"
    env = dict(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="COLL")
    assert line in run(drivers, name, *args, **env).log
    assert line not in run(drivers, name, *args, ACCL_GROUP_LAUNCH="0", **env).log
    # Bytes with a tail after the 16-byte packs (sendrecv: every size above is a multiple of 16 but 4 B).
    assert line in run(drivers, name, "-b", "1000003", "-e", "1000003", "-n", "2", "-w", "1", "-c", "1", "-g", "4",
                       "-d", "int8", **env).log
    run(drivers, name, "-b", "1M", "-e", "1M", "-n", "2", "-w", "1", "-c", "1", "-g", "4", "-G", "2")


def test_one_rank(drivers):
    run(drivers, "all_reduce", "-b", "8", "-e", "64M", "-f", "8", "-n", "2", "-w", "1", "-c", "1", "-o", "all")


def run_hosts(drivers, name, nprocs, host_of, *args, timeout=300, env=()):
    """`nprocs` MPI processes on the one GPU, process p with NCCL_HOSTID
    host<host_of(p)>: device buffers between those "hosts" cross on sockets
    (staged through pinned memory, or with ACCL_NET_KERNELS=1 the ring's
    kernels over pinned FIFOs). env: more NAME=VALUE for every rank."""
    mpirun = shutil.which("mpirun")
    if not mpirun:
        pytest.skip("no mpirun")
    hostids = " ".join(f"host{host_of(p)}" for p in range(nprocs))
    # Rank p takes word p of ACCL_HOSTIDS as its NCCL_HOSTID, then runs the
    # driver with the arguments that follow the script (sh -c SCRIPT NAME ARGS...).
    script = ('i=0; for h in $ACCL_HOSTIDS; do [ "$i" = "$OMPI_COMM_WORLD_RANK" ] && export NCCL_HOSTID=$h; '
              f'i=$((i + 1)); done; exec "{drivers / (name + "_perf")}" "$@"')
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(nprocs), "-x", "NCCL_SOCKET_IFNAME=lo",
           "-x", "ACCL_TIMEOUT=60", "-x", f"LD_LIBRARY_PATH={accl.lib_dir()}", "-x", f"ACCL_HOSTIDS={hostids}",
           *[x for kv in env for x in ("-x", kv)], "sh", "-c", script, "sh", *map(str, args), "-T", "120"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-6000:]
    t = Table(p.stdout)
    t.assert_clean()
    threads = int(args[args.index("-t") + 1]) if "-t" in args else 1
    assert len(t.devices) == nprocs * threads, t.devices  # one world, not nprocs single-rank runs
    t.log = p.stderr
    return t


@pytest.mark.parametrize("kernels", ["1", "0"], ids=["net_kernels", "staged"])
@pytest.mark.parametrize("name", COLLS)
def test_between_hosts(drivers, name, kernels):
    # 2 processes, each its own host: the ring's collectives as kernels over
    # the network's pinned FIFOs (the rest staged), or every call staged.
    t = run_hosts(drivers, name, 2, lambda p: p, "-b", "8", "-e", "8M", "-f", "8", "-n", "2", "-w", "1", "-c", "1",
                  env=(f"ACCL_NET_KERNELS={kernels}", "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT"))
    assert len(t.rows) == 7
    kernels_said = "the ring's collectives run in kernels (to rank 1 by net ("
    assert (kernels_said in t.log) == (kernels == "1"), t.log[-3000:]


@pytest.mark.parametrize("kernels", ["1", "0"], ids=["net_kernels", "staged"])
@pytest.mark.parametrize("name", ["all_reduce", "all_gather", "reduce_scatter"])
def test_between_hosts_two_ranks_each(drivers, name, kernels):
    # 4 processes on 2 hosts: within a host shm (staged) or CUDA IPC (the
    # ring's kernels), sockets between; every type and op. Staged calls run
    # the host's hierarchical collectives (within the host, then each rank
    # along its rail).
    t = run_hosts(drivers, name, 4, lambda p: p // 2, "-b", "4", "-e", "1M", "-f", "64", "-n", "1", "-w",
                  "0", "-c", "1", "-d", "all", "-o", "all",
                  env=(f"ACCL_NET_KERNELS={kernels}", "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,COLL"))
    said = "the ring's collectives run in kernels (to rank"
    assert (said in t.log and "by cuda-ipc" in t.log and "by net (" in t.log) == (kernels == "1"), t.log[-3000:]
    if kernels == "0":
        assert "hierarchical collectives: place" in t.log, t.log[-3000:]


@pytest.mark.parametrize("kernels", ["1", "0"], ids=["net_kernels", "staged"])
def test_between_hosts_threads_and_graphs(drivers, kernels):
    # 2 processes x 2 thread ranks (2 hosts of 2 ranks), captured in CUDA graphs and replayed.
    t = run_hosts(drivers, "all_reduce", 2, lambda p: p, "-b", "8", "-e", "4M", "-f", "16", "-n", "2", "-w", "1",
                  "-c", "1", "-t", "2", "-G", "3",
                  env=(f"ACCL_NET_KERNELS={kernels}", "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT"))
    assert ("the ring's collectives run in kernels (to rank" in t.log) == (kernels == "1"), t.log[-3000:]
    run_hosts(drivers, "alltoall", 2, lambda p: p, "-b", "8", "-e", "4M", "-f", "16", "-n", "2", "-w", "1", "-c",
              "1", "-G", "3")


# Staged in chunks: 64 KiB chunks, counts that leave a short last chunk (and
# at 16 MB, more than 64 would be needed: 64 larger ones), every type, every
# op (allreduce, reduce-scatter) or root; in place too (the drivers' second column).
CHUNKS = ("ACCL_STAGE_CHUNK_BYTES=65536", "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=COLL", "ACCL_NET_KERNELS=0")


@pytest.mark.parametrize("name", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"])
def test_between_hosts_in_chunks(drivers, name):
    args = ["-b", "1000008", "-e", "16000128", "-f", "16", "-n", "1", "-w", "0", "-c", "1", "-d", "all"]
    if name in ("all_reduce", "reduce_scatter"):  # (reduce: every root instead, sum)
        args += ["-o", "all"]
    if name in ("reduce", "broadcast"):
        args += ["-r", "all"]
    t = run_hosts(drivers, name, 2, lambda p: p, *args, env=CHUNKS)
    assert "staged in " in t.log and " chunks of " in t.log, t.log[-3000:]


def test_between_hosts_in_chunks_graphs_and_four_ranks(drivers):
    # Captured chunks (each its own host function and done word), replayed;
    # chunks handed over by a kernel instead of stream writes; then 4
    # processes on 2 hosts (shm within a host for each chunk).
    for name in ("all_gather", "reduce_scatter", "all_reduce"):
        t = run_hosts(drivers, name, 2, lambda p: p, "-b", "1000008", "-e", "4000032", "-f", "4", "-n", "2", "-w",
                      "1", "-c", "1", "-G", "3", env=CHUNKS)
        assert "(first such captured call)" in t.log, t.log[-3000:]
    t = run_hosts(drivers, "all_reduce", 2, lambda p: p, "-b", "1000008", "-e", "4000032", "-f", "4", "-n", "2",
                  "-w", "1", "-c", "1", env=CHUNKS[:2] + ("NCCL_DEBUG_SUBSYS=COLL,INIT", "ACCL_STAGE_STREAM_WRITE=0",
                                     "ACCL_NET_KERNELS=0"))
    assert "handed to the proxy by a kernel" in t.log and "(first such eager call)" in t.log, t.log[-3000:]
    run_hosts(drivers, "all_gather", 4, lambda p: p // 2, "-b", "1000008", "-e", "4000032", "-f", "4", "-n", "2",
              "-w", "1", "-c", "1", env=CHUNKS)


def test_eight_threads(drivers):
    run(drivers, "all_reduce", "-b", "8", "-e", "16M", "-f", "16", "-n", "2", "-w", "1", "-c", "1", "-t", "8")


@pytest.mark.timeout(300)
def test_init_warns_where_alltoall_cannot_fit(drivers):
    # 8 ranks on one GPU fit a group with every rank (14 blocks each); 16 on an
    # H200 (8 channels each) would need 30 blocks per rank, 480 at once where
    # 264 fit: init says so. Their allreduce (direct) still runs.
    env = dict(os.environ, NCCL_SOCKET_IFNAME="lo", ACCL_TIMEOUT="60", LD_LIBRARY_PATH=accl.lib_dir(),
               NCCL_DEBUG="WARN")
    for ranks, warned in (("8", False), ("16", True)):
        p = subprocess.run([str(drivers / "all_reduce_perf"), "-b", "8", "-e", "1M", "-f", "32", "-g", ranks, "-c",
                            "1", "-n", "2", "-w", "1", "-T", "120"], capture_output=True, text=True, timeout=240,
                           env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        Table(p.stdout).assert_clean()
        assert ("may wait until ACCL_TIMEOUT" in p.stdout + p.stderr) == warned, p.stdout + p.stderr
