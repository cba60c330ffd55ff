"""The test clusters themselves: where the two-node cluster cannot be made,
it says why (the fixture turns that into a skip, or a failure in CI)."""

from __future__ import annotations

import pytest

from tests import slurm_cluster
from tests.slurm_cluster import NamespacedSlurm, SlurmUnavailable


def test_without_root_the_two_node_cluster_says_it_needs_root(tmp_path, monkeypatch):
    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 1000)
    cluster = NamespacedSlurm(tmp_path)
    with pytest.raises(SlurmUnavailable, match="needs root"):
        cluster.start()
    # nothing was made that would need removing
    assert not (tmp_path / "network.json").exists()
    cluster.stop()


def test_the_config_gives_each_node_its_own_address_and_files(tmp_path):
    cluster = NamespacedSlurm(tmp_path, nodes=3)
    cluster.net = {"controller": "10.231.7.1",
                   "addresses": {f"cn{i}": f"10.231.7.{10 + i}" for i in (1, 2, 3)}}
    cluster._write_config()
    conf = cluster.conf.read_text()
    assert "SlurmctldHost=localhost(10.231.7.1)\n" in conf
    for i in (1, 2, 3):
        assert f"NodeName=cn{i} NodeAddr=10.231.7.{10 + i} CPUs=1 " in conf
    # one slurmd per node on one machine: per-node spool, pid and log files
    assert f"SlurmdSpoolDir={tmp_path}/d/%n\n" in conf and "slurmd.%n.pid" in conf
    assert "PartitionName=debug Nodes=cn1,cn2,cn3 " in conf
