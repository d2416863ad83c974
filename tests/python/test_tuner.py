"""The tuner's model as Python sees it, and the choice it makes in a live run."""

import os
import subprocess
import sys

import pytest

import accl


def test_predictions_grow_with_size_and_hosts():
    small = accl.tuner.predict("allreduce", "ring", 8, 4)
    big = accl.tuner.predict("allreduce", "ring", 1 << 26, 4)
    assert 0 < small < big
    assert accl.tuner.predict("allreduce", "ring", 1 << 20, 4, nhosts=2) > accl.tuner.predict(
        "allreduce", "ring", 1 << 20, 4)
    # ring: 2(n-1) alpha + 2(n-1)/n S / beta with the documented shm constants
    c = accl.tuner.CONSTANTS["shm"]
    s = 1 << 20
    want = 2 * 3 * c["alpha_us"] + 2 * 3 / 4 * s / (c["gbps"] * 1e3)
    assert accl.tuner.predict("allreduce", "ring", s, 4) == pytest.approx(want)


def test_choice_follows_the_model():
    assert accl.tuner.choose("allreduce", 8, 16) == "tree"
    assert accl.tuner.choose("allreduce", 1 << 28, 16) == "ring"
    # 2 ranks: the tree is one exchange, one hop where the ring takes two; on
    # one host it reduces twice the bytes, so the ring keeps large calls there.
    assert accl.tuner.choose("allreduce", 8, 2) == "tree"
    assert accl.tuner.choose("allreduce", 1 << 28, 2) == "ring"
    assert accl.tuner.choose("allreduce", 1 << 28, 2, nhosts=2) == "tree"
    assert accl.tuner.choose("broadcast", 8, 16) == "ring"  # the only algorithm there


def test_hierarchical_allreduce_in_the_model():
    # H hosts of L ranks: a reduce-scatter and an allgather of S/L within the
    # host (shared memory), a ring allreduce of S/L along each rail.
    shm, net = accl.tuner.CONSTANTS["shm"], accl.tuner.CONSTANTS["net"]
    s, hosts, local = 1 << 24, 2, 4
    block = s // local
    want = 2 * ((local - 1) * shm["alpha_us"] + (local - 1) * block / (shm["gbps"] * 1e3)) + \
        2 * (hosts - 1) * net["alpha_us"] + 2 * (hosts - 1) / hosts * block / (net["gbps"] * 1e3)
    assert accl.tuner.predict("allreduce", "hier", s, 8, nhosts=2) == pytest.approx(want)
    assert accl.tuner.choose("allreduce", s, 8, nhosts=2) == "hier"
    assert accl.tuner.choose("allreduce", s, 8, nhosts=8) != "hier"  # one rank per host: nothing to gather
    for nranks, nhosts in ((8, 1), (5, 2), (2, 2)):  # one host, uneven hosts, hosts of one rank
        with pytest.raises(accl.InvalidArgumentError):
            accl.tuner.predict("allreduce", "hier", s, nranks, nhosts=nhosts)
    # allgather and reducescatter (s per rank): H passes within the host, one along the rail
    ring_local = accl.tuner.predict("allgather", "ring", s, local)
    ring_rail = accl.tuner.predict("allgather", "ring", s, hosts, nhosts=hosts)
    for coll in ("allgather", "reducescatter"):
        assert accl.tuner.predict(coll, "hier", s, 8, nhosts=2) == pytest.approx(hosts * ring_local + ring_rail)
        assert accl.tuner.choose(coll, s, 8, nhosts=2) == "hier"
    with pytest.raises(accl.InvalidArgumentError):
        accl.tuner.predict("broadcast", "hier", s, 8, nhosts=2)


def test_bad_names_are_errors():
    with pytest.raises(accl.InvalidArgumentError):
        accl.tuner.predict("allscatter", "ring", 8, 2)
    with pytest.raises(accl.InvalidArgumentError):
        accl.tuner.predict("broadcast", "tree", 8, 2)
    with pytest.raises(accl.InvalidArgumentError):
        accl.tuner.predict("allreduce", "ring", 8, 2, nhosts=3)


def test_simulated_group_matches_the_model():
    with accl.Communicator(1, accl.get_unique_id(), 0) as comm:
        import numpy as np
        x = np.ones(1 << 16, np.float32)
        with accl.simulate() as g:
            comm.allreduce(x)
            comm.allreduce(x)
    assert g.estimated_time == pytest.approx(2 * accl.tuner.predict("allreduce", "ring", x.nbytes, 1), rel=1e-5)
