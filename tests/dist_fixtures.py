"""The process group the drivers make for themselves, for tests that run
driver code in the test process: made by caraml.node.dist.init exactly as a
driver makes it, left again at the end of the test."""

from __future__ import annotations

import pytest

from caraml.node import dist

LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                      "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                      "SLURM_NTASKS_PER_NODE")


@pytest.fixture
def single_cpu(monkeypatch) -> dist.Dist:
    """One process on the CPU, as `python -m <driver> --device cpu` runs."""
    for var in LAUNCHER_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    d = dist.init("cpu")
    yield d
    d.close()
