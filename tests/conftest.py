"""Fixtures shared by the test suite: a real one-node Slurm cluster."""

from __future__ import annotations

import os

import pytest

from tests.slurm_cluster import LocalSlurm, SlurmUnavailable


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A real slurmctld + slurmd on localhost for the whole session.
    CI sets CARAML_REQUIRE_SLURM=1, so there a missing Slurm fails rather
    than skips."""
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except SlurmUnavailable as exc:
        cluster.stop()
        if os.environ.get("CARAML_REQUIRE_SLURM"):
            raise
        pytest.skip(f"no local Slurm cluster: {exc}")
    yield cluster
    cluster.stop()
