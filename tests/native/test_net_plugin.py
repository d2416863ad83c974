"""NCCL net plugins (src/net/plugin.cc): a foreign plugin built in the tree
(tests/plugins/net_plugin.c, against ACCL's installed plugin/nccl_net.h only)
carries every collective between emulated hosts, as table v12 (NCCL 2.32's),
v11 and v8;
plugins that cannot be used (init fails, only an older table, no file) fall
back to ACCL's own backend with one WARN saying why; NCCL_NET picks a backend
by name, and a name that is not there fails the init clearly."""
import os
import shutil
import subprocess
import sys
import time

import pytest

from accl.emunet import EmuNet

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"),
                                reason="needs root and iproute2 for network namespaces")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VARIANTS = {"v12": ["-DPLUGIN_VERSION=12"], "v11": ["-DPLUGIN_VERSION=11"], "v8": ["-DPLUGIN_VERSION=8"],
            "silent": ["-DPLUGIN_VERSION=12", "-DSILENT_CLOSE"],
            "broken": ["-DPLUGIN_VERSION=12", "-DBROKEN_INIT"], "old": ["-DOLD_ONLY", "-Wno-unused-function"]}
COLLECTIVES = ["allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "gather", "scatter",
               "sendrecv"]


@pytest.fixture(scope="session")
def plugin(accl_paths, tmp_path_factory):
    """The test plugin built as `variant`; its path."""
    _, inc = accl_paths
    out = tmp_path_factory.mktemp("netplugin")
    built = {}

    def build(variant):
        if variant not in built:
            so = out / f"libnccl-net-{variant}.so"
            subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror",
                            *VARIANTS[variant], f"-I{inc}", os.path.join(ROOT, "tests", "plugins", "net_plugin.c"),
                            "-o", str(so)], check=True, timeout=120)
            built[variant] = so
        return str(built[variant])

    return build


@pytest.fixture
def net():
    try:
        n = EmuNet(hosts=2, nics=1).up()
    except RuntimeError as e:
        pytest.skip(str(e))
    yield n
    n.down()


def debug_env(**extra):
    return {**os.environ, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", **extra}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("variant,collectives", [("v12", COLLECTIVES), ("v11", ["allreduce", "sendrecv"]),
                                                 ("v8", ["allreduce", "sendrecv"])])
def test_a_plugin_carries_every_collective_between_hosts(plugin, net, variant, collectives):
    env = debug_env(NCCL_NET_PLUGIN=plugin(variant))
    for coll in collectives:
        results = net.launch([sys.executable, "-m", "accl.perf", coll, "-b", "8", "-e", "1M", "-f", "16", "-n", "1",
                              "-w", "1", "-c", "1", "-d", "int32"], ranks_per_host=1, timeout=120, env=env)
        out = results[0].stdout
        assert all(r.returncode == 0 for r in results), "\n".join(r.stdout[-3000:] for r in results)
        assert "# Out of bounds values : 0 OK" in out, out[-3000:]
        assert f"NET/Plugin: Loaded net plugin AcclTestNet ({variant})" in out, out[-3000:]
        rail = "rail 3, plane 1" if variant == "v12" else "rail -1, plane -1"  # only v12 says (the plugin: 3, 1)
        assert f"NET/Plugin: device 0 acctest0: 1000 Mbps, {rail}" in out, out[-3000:]
        moved = [int(line.rsplit("after ", 1)[1].split()[0]) for line in out.splitlines()
                 if "AcclTestNet: closed a send connection after" in line]
        assert moved and max(moved) > 0, out[-3000:]  # the data went through the plugin


@pytest.mark.timeout(120)
@pytest.mark.parametrize("variant,why", [
    ("broken", "its init (v12) failed"),
    ("old", "it exports no table ACCL loads (ncclNetPlugin_v8 to v12); it has v7"),
    (None, "no plugin could be loaded"),
])
def test_an_unusable_plugin_falls_back_with_a_warning(plugin, net, c_program, variant, why):
    path = plugin(variant) if variant else "/nonexistent/libnccl-net-none.so"
    results = net.launch([str(c_program("rank_worker")), "pmi", "pmi", "100003", "2"], ranks_per_host=1, timeout=90,
                         env=debug_env(NCCL_NET_PLUGIN=path))
    for rank, r in enumerate(results):
        assert r.returncode == 0, r.stdout[-3000:]
        assert f"rank {rank}: done" in r.stdout
        assert why in r.stdout and "using ACCL's own network backend" in r.stdout, r.stdout[-3000:]
        assert "NET: using Socket" in r.stdout


@pytest.mark.timeout(120)
def test_nccl_net_picks_a_backend_by_name(plugin, net, c_program):
    worker = [str(c_program("rank_worker")), "pmi", "pmi", "1003", "1"]
    res = net.launch(worker, timeout=90, env=debug_env(NCCL_NET_PLUGIN=plugin("v11"), NCCL_NET="Socket"))
    assert all(r.returncode == 0 and "NET: using Socket" in r.stdout for r in res), res[0].stdout[-3000:]
    res = net.launch(worker, timeout=90, env=debug_env(NCCL_NET="NoSuchNet"))
    for r in res:
        assert r.returncode != 0 and "NCCL_NET=NoSuchNet names no network backend here" in r.stdout, r.stdout[-3000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("variant", ["v11", "silent", None])
def test_a_dead_peer_is_named_within_seconds_whatever_the_backend(plugin, net, c_program, variant):
    # The control line says a peer died even where the backend never does
    # ("silent": a receive from a dead peer never completes).
    env = debug_env(**({"NCCL_NET_PLUGIN": plugin(variant)} if variant else {"NCCL_NET_PLUGIN": "none"}))
    env.update(NCCL_COMM_ID=f"{net.hosts[0].ports[0].addr}:29641", ACCL_SECRET="x" * 32, PMI_SIZE="2")
    procs = []
    for rank, host in enumerate(net.hosts):
        e = host.env(env)
        e["PMI_RANK"] = str(rank)
        procs.append(subprocess.Popen(host.cmd([str(c_program("rank_worker")), "pmi", "pmi", "1000003", "100000"]),
                                      env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        seen = ""
        while "rank 0: calling 2" not in seen:  # both ranks are in their loop of allreduces
            line = procs[0].stdout.readline()
            assert line, seen[-3000:]
            seen += line
        procs[1].kill()
        t0 = time.monotonic()
        out = seen + procs[0].communicate(timeout=60)[0]
        assert procs[0].returncode == 10 + 6, out[-3000:]  # ncclRemoteError
        assert time.monotonic() - t0 < 15, out[-3000:]
        assert "rank 1" in out.split("FAILED", 1)[1], out[-3000:]
        if variant is None:  # the backend and the NIC the connection used
            assert "via net (Socket nic0p0)) failed" in out, out[-3000:]
    finally:
        for p in procs:
            p.kill()
            p.wait()
