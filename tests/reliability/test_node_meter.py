"""The nodes' energy from Slurm's meter (caraml/job/node_energy.py) never
gives a figure the meter cannot give: a meter that restarts (Slurm's
unsigned sum wraps), one that stands still while the job runs, and a wall
clock that steps between the job's two readings. The job script's two
calls run as it runs them (`begin` and `end` on the file); Slurm's commands
answer as a metered cluster's do (the real ones: tests/e2e/test_e2e_node_energy.py)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from caraml.job import node_energy
from caraml.job.node_energy import FILE_NAME, main, read_node_energy
from caraml.row.facts import node_energy as row_fields

CONFIG = ("AcctGatherEnergyType    = acct_gather_energy/pm_counters\n"
          "JobAcctGatherType       = jobacct_gather/linux\n")
JOB = {"SLURM_JOB_ID": "12", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "cn[1-2]"}


class Cluster:
    """Slurm's answers; `consumed` is what sstat gives for the extern step next."""

    def __init__(self, consumed: str) -> None:
        self.consumed = consumed

    def __call__(self, *argv: str) -> tuple[str, str]:
        if argv[:3] == ("scontrol", "show", "config"):
            return CONFIG, ""
        if argv[:3] == ("scontrol", "show", "hostnames"):
            return "cn1\ncn2\n", ""
        assert argv[0] == "sstat" and "12.extern" in argv, argv
        return f"{self.consumed}\n", ""


@pytest.fixture
def job(tmp_path, monkeypatch):
    """job(first, last) runs the job script's two readings with sstat giving
    `first`, then `last`, and returns the file's figure."""
    for name, value in JOB.items():
        monkeypatch.setenv(name, value)

    def run(first: str, last: str, between=lambda: None):
        cluster = Cluster(first)
        monkeypatch.setattr(node_energy, "_slurm", cluster)
        path = tmp_path / FILE_NAME
        assert main(["begin", str(path), "--declared", "pm_counters"]) == 0
        cluster.consumed = last
        between()
        assert main(["end", str(path)]) == 0
        return read_node_energy(path)
    return run


def test_a_node_meter_that_restarts_is_named_as_such(job):
    """Slurm's plugin sums each node's consumption from the step's start in
    an unsigned integer: a meter that restarts makes it wrap."""
    found = job("5050368", "18446744073704501248")
    assert found.state == "failed" and found.energy_wh is None
    assert found.reason == ("no node energy at the job's end: step 12.extern's energy went below 0 and "
                            "Slurm's unsigned sum wrapped ('18446744073704501248', -5050368 J): its meter "
                            "restarted")
    assert row_fields(found, 1000.0, 2)["node_energy_reason"].endswith("its meter restarted")


def test_a_node_meter_that_stands_still_gives_no_figure(job):
    found = job("5050368", "5050368", between=lambda: time.sleep(0.05))
    assert found.state == "failed" and found.energy_wh is None
    assert "step 12.extern's energy stood still (0 J over" in found.reason
    fields = row_fields(found, 1000.0, 2)
    assert fields["node_wh"] is None and fields["work_per_node_wh"] is None


def test_a_wall_clock_that_steps_during_the_job_leaves_the_window_its_length(job, monkeypatch):
    """The wall clock steps an hour ahead between the job's two readings:
    the figure's window is what the node's monotonic clock counted."""
    def stepped():
        wall = time.time
        monkeypatch.setattr(node_energy, "time", SimpleNamespace(time=lambda: wall() + 3600,
                                                                 monotonic=time.monotonic))
    found = job("5050368", "5410368", between=stepped)  # 360 kJ
    assert found.state == "measured" and found.energy_wh == pytest.approx(100.0)
    assert found.duration_s < 60, found
    assert any(note.startswith("the wall clock stepped by +3600 s during the job") for note in found.notes)
    assert "the wall clock stepped" in row_fields(found, 1000.0, 2)["node_energy_reason"]
