"""Two real "hosts" on one machine: network namespaces joined by a veth pair,
two ranks in each. Ranks on one host use shared memory; the ring crosses the
veth over TCP (NCCL_SOCKET_IFNAME names each host's interface)."""
import os
import shutil
import subprocess
import uuid

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"),
                                reason="needs root and iproute2 for network namespaces")


def sh(*args):
    subprocess.run(args, check=True, capture_output=True, timeout=30)


@pytest.fixture
def two_hosts():
    tag = uuid.uuid4().hex[:6]
    hosts = [(f"accl{tag}h{i}", f"av{tag}{i}", f"10.77.{int(tag[:2], 16)}.{i + 1}") for i in range(2)]
    try:
        for ns, _, _ in hosts:
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "link", "add", hosts[0][1], "type", "veth", "peer", "name", hosts[1][1])
        for ns, dev, addr in hosts:
            sh("ip", "link", "set", dev, "netns", ns)
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
    except (subprocess.CalledProcessError, OSError) as e:
        for ns, _, _ in hosts:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        pytest.skip(f"network namespaces unavailable here: {e}")
    yield hosts
    for ns, _, _ in hosts:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.mark.timeout(120)
def test_allreduce_across_two_namespaced_hosts(c_program, two_hosts):
    exe = c_program("rank_worker")
    root_addr = two_hosts[0][2]
    procs = []
    for rank in range(4):
        ns, dev, _ = two_hosts[rank // 2]
        env = {**os.environ, "NCCL_COMM_ID": f"{root_addr}:29611", "NCCL_SOCKET_IFNAME": dev,
               "NCCL_HOSTID": ns, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT"}
        procs.append(subprocess.Popen(["ip", "netns", "exec", ns, str(exe), str(rank), "4", "1000003", "5"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=90)[0] for p in procs]
    for rank, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, out
        assert f"rank {rank}: done" in out
    # Within a host: shared memory; across the veth: sockets.
    assert "rank 0 -> rank 1 via shm" in outs[0]
    assert "rank 1 -> rank 2 via net" in outs[1]
    assert "rank 3 -> rank 0 via net" in outs[3]
