"""The job's node energy from Slurm's energy accounting, on real Slurm
clusters (tests/conftest.py): a two-node job through the job flow
(caraml/login/jobplan.py, aux/job.sh.in) on nodes whose slurmd reads
HPE Cray pm_counters driven at a known power, beside jpwr's own
pm_counters reading of the same nodes; a cluster that meters no node; and
a meter that never answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from caraml.job.node_energy import FILE_NAME, begin, read_node_energy
from caraml.login import jobplan
from caraml.row.decide import decide_row
from caraml.row.evidence import gather
from jpwr.aggregate import combine
from tests.caraml.row_packages import execute, run_dir
from tests.slurm_cluster import NODE_WATTS
from tests.systems.test_jobplan import write_facts

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
JOB_S = 20


def job_run(tmp_path, cluster, monkeypatch, **facts) -> Path:
    """A job with these facts, written and submitted by the job planner as
    JUBE's execute step does, run to its end: its work package."""
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    work = execute(run_dir(tmp_path, {"nodes": facts.get("nodes", "1")}))
    work.mkdir(parents=True, exist_ok=True)
    assert jobplan.submit(write_facts(work / "job.facts", caraml_root=str(ROOT), submit_mode="slurm",
                                      cpus_per_task="1", threads_per_proc="1", **facts)) == 0
    cluster.wait_for_jobs(300)
    return work


def test_a_two_node_jobs_node_energy_from_slurm_matches_the_known_power(
        tmp_path, metered_slurm2n, monkeypatch):
    work = job_run(tmp_path, metered_slurm2n, monkeypatch, nodes="2", launcher="jpwr",
                   energy_methods="pm_counters", node_meter="pm_counters",
                   job_command=f'-c "import time; time.sleep({JOB_S})"')
    energy = read_node_energy(work / FILE_NAME)
    assert energy.state == "measured", (energy, (work / "job.err").read_text())
    assert (energy.scope, energy.window, energy.source, energy.nodes, energy.notes) == (
        "node", "job", "slurm-acct_gather_energy/pm_counters", ("cn1", "cn2"), ())
    assert energy.duration_s > JOB_S
    # both nodes for the job script's whole run: their power x that time
    assert energy.node_wh == pytest.approx(sum(NODE_WATTS.values()) * energy.duration_s / 3600,
                                           rel=0.02)

    # jpwr's own reading of the same counters, each node its own figure
    table = combine([work / "energy"])
    nodes = table[table["device"] == "node"].set_index("host")
    assert sorted(nodes.index) == ["cn1", "cn2"] and set(nodes["basis"]) == {"counter"}
    for host, watts in NODE_WATTS.items():
        mean_w = nodes.loc[host, "energy_wh"] * 3600 / nodes.loc[host, "duration_s"]
        assert mean_w == pytest.approx(watts, rel=0.03)
    # jpwr measured the srun step, which lies inside the job script's run
    assert nodes["energy_wh"].sum() < energy.node_wh

    # the row decided from the work package: Slurm's figure beside jpwr's node scope, never added
    combined = subprocess.run([sys.executable, "-m", "jpwr", "combine", "--out", str(tmp_path / "energy.csv"),
                               str(work / "energy")], cwd=ROOT, capture_output=True, text=True, check=True)
    (tmp_path / "jpwr.out").write_text(combined.stdout)
    (tmp_path / "jpwr.err").write_text(combined.stderr)
    row = decide_row("llm", gather(work, tmp_path / "jpwr.out", tmp_path / "jpwr.err", 0), slurm_state=None)
    assert (row.node_wh, row.node_energy_scope, row.node_energy_window, row.node_energy_source) == (
        energy.node_wh, "node", "job", "slurm-acct_gather_energy/pm_counters")
    assert row.node_power_w_per_node == pytest.approx(sum(NODE_WATTS.values()) / 2, rel=0.02)
    assert row.energy_by_scope["node"] == pytest.approx(nodes["energy_wh"].sum(), rel=1e-3)

    shown = subprocess.run(["python3", "-m", "caraml.job.node_energy", "show", str(work / FILE_NAME)],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert shown.startswith(f"CARAML node energy: state=measured wh={energy.energy_wh:.6g} scope=node "
                            "window=job source=slurm-acct_gather_energy/pm_counters nodes=cn1+cn2 "), shown


def test_a_cluster_that_meters_no_node_says_so_and_notes_the_declaration(slurm, monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    record = begin({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "1"}, "pm_counters")
    assert record["state"] == "none"
    assert record["reason"] == ("the cluster meters no node: its AcctGatherEnergyType is "
                                "acct_gather_energy/none")
    assert record["notes"] == ["platform.xml declares node meter pm_counters for this system but the "
                               "cluster's AcctGatherEnergyType is none: fix node_meter in platform.xml "
                               "or ask the centre"]


def test_a_meter_that_never_answers_leaves_no_figure_and_says_why(tmp_path, meterless_slurm, monkeypatch):
    work = job_run(tmp_path, meterless_slurm, monkeypatch, launcher="srun", node_meter="pm_counters",
                   job_command="-c pass")
    job_id = (work / "job.out").read_text().split("job_id=")[1].split()[0]
    energy = read_node_energy(work / FILE_NAME)
    assert (energy.state, energy.energy_wh, energy.node_wh) == ("failed", None, None)
    # no extern step here: the one-node job's batch step, whose plugin read nothing
    assert energy.reason == (f"no node energy: sstat gives no energy for step {job_id}.batch (an empty "
                             "value: Slurm's plugin read no meter on the step's nodes)")
