"""The node energy file (caraml/job/node_energy.py) without a cluster:
what a job outside Slurm records, Slurm's energy plugins in a cluster's
configuration, and what the reader makes of every state of the file. Real
Slurm clusters: tests/e2e/test_e2e_node_energy.py."""

from __future__ import annotations

import json

import pytest

from caraml.job import node_energy
from caraml.job.node_energy import (
    FILE_NAME,
    FORMAT,
    begin,
    end,
    energy_plugins,
    main,
    read_node_energy,
    write,
)

# as `scontrol show config` of Slurm 22.05 prints them
CONFIG = """Configuration data as of 2026-11-27T14:20:00
AccountingStorageType   = accounting_storage/none
AcctGatherEnergyType    = {energy}
AcctGatherNodeFreq      = 0 sec
JobAcctGatherFrequency  = 30
JobAcctGatherType       = {gather}
"""

MEASURED = {"format": FORMAT, "window": "job", "declared": "pm_counters", "notes": [], "job_id": "12",
            "source": "slurm-acct_gather_energy/pm_counters", "scope": "node", "nodes": ["cn1", "cn2"],
            "state": "measured", "step": "12.extern", "begin": {"unix": 100.0, "joules": 500},
            "end": {"unix": 160.0, "joules": 60500}, "duration_s": 60.0, "energy_j": 60000,
            "energy_wh": 60000 / 3600, "mean_w": 1000.0}


@pytest.mark.parametrize("energy, gather, plugins", [
    ("acct_gather_energy/pm_counters", "jobacct_gather/linux", ["pm_counters"]),
    ("acct_gather_energy/none", "jobacct_gather/linux", []),
    ("(null)", "jobacct_gather/none", []),
    ("acct_gather_energy/gpu,acct_gather_energy/ipmi", "jobacct_gather/cgroup", ["gpu", "ipmi"]),
])
def test_the_energy_plugins_of_a_clusters_configuration(energy, gather, plugins):
    assert energy_plugins(CONFIG.format(energy=energy, gather=gather)) == (plugins, gather)


def test_outside_slurm_the_file_says_that_no_slurm_meters_the_node(tmp_path):
    record = begin({}, "none")
    assert end(record) == record  # nothing to read at the end either
    write(tmp_path / FILE_NAME, record)
    energy = read_node_energy(tmp_path / FILE_NAME)
    assert (energy.state, energy.energy_wh, energy.node_wh) == ("none", None, None)
    assert energy.reason.startswith("the job ran outside Slurm (submit mode local)")
    assert [p.name for p in tmp_path.iterdir()] == [FILE_NAME]  # no partial file left


def test_a_measured_node_figure_and_one_of_another_scope(tmp_path):
    write(tmp_path / "node.json", MEASURED)
    write(tmp_path / "gpu.json", {**MEASURED, "scope": "gpu", "source": "slurm-acct_gather_energy/gpu"})
    node = read_node_energy(tmp_path / "node.json")
    assert node.state == "measured" and node.reason == ""
    assert node.node_wh == node.energy_wh == pytest.approx(60000 / 3600)
    assert (node.scope, node.window, node.nodes, node.duration_s) == ("node", "job", ("cn1", "cn2"), 60.0)
    gpus = read_node_energy(tmp_path / "gpu.json")
    # Slurm's gpu plugin meters the GPUs, not the node: a figure, never a node's
    assert gpus.energy_wh == pytest.approx(60000 / 3600) and gpus.node_wh is None


@pytest.mark.parametrize("content, state, reason", [
    (None, "missing", "node_energy.json does not exist: the job recorded no node energy"),
    ('{"format": "caraml-node-energy-1", "state": "meas', "unreadable", "is not readable JSON"),
    ('{"format": "jpwr-run-1"}', "unreadable", "is not a node energy file of format caraml-node-energy-1"),
    ('{"format": "caraml-node-energy-1", "state": "measured"}', "unreadable",
     "says measured but holds no energy_wh and duration_s"),
    ('{"format": "caraml-node-energy-1", "state": "begun", "job_id": "12"}', "incomplete",
     "the job ended before its node energy was read at its end (killed outright, or its node lost); "
     "sacct -j 12 -o ConsumedEnergyRaw may still have it"),
    ('{"format": "caraml-node-energy-1", "state": "failed", "reason": "no node energy: x"}', "failed",
     "no node energy: x"),
])
def test_every_file_the_reader_may_meet_has_a_state_and_a_reason(tmp_path, content, state, reason):
    path = tmp_path / FILE_NAME
    if content is not None:
        path.write_text(content)
    energy = read_node_energy(path)
    assert (energy.state, energy.energy_wh, energy.node_wh) == (state, None, None)
    assert reason in energy.reason


def slurm_answering(sstat_out: str, sstat_err: str):
    """Slurm's commands as a metered two-node cluster answered them
    (tests/e2e/test_e2e_node_energy.py has them for real), sstat's answer given."""
    def answer(*argv):
        if argv[:3] == ("scontrol", "show", "config"):
            return CONFIG.format(energy="acct_gather_energy/pm_counters", gather="jobacct_gather/linux"), ""
        if argv[:3] == ("scontrol", "show", "hostnames"):
            return "cn1\ncn2\n", ""
        return sstat_out, sstat_err
    return answer


@pytest.mark.parametrize("sstat_out, sstat_err, state, reason", [
    # Slurm 22.05's sstat for a step a job does not have: exit status 0, nothing on stdout
    ("", "sstat: error: StepId=12.extern not found running.", "none",
     "the job runs on 2 nodes and Slurm has no step on all of them for all of its time (sstat finds no "
     "step 12.extern (sstat: error: StepId=12.extern not found running.); the centre's "
     "PrologFlags=Contain gives every job one)"),
    # a node whose meter gave nothing: the step has no value at all
    ("\n", "", "failed", "no node energy: sstat gives no energy for step 12.extern (an empty value: "
     "Slurm's plugin read no meter on the step's nodes)"),
])
def test_a_job_on_two_nodes_without_a_whole_figure_says_why(monkeypatch, sstat_out, sstat_err, state,
                                                           reason):
    monkeypatch.setattr(node_energy, "_slurm", slurm_answering(sstat_out, sstat_err))
    record = begin({"SLURM_JOB_ID": "12", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "cn[1-2]"},
                   "pm_counters")
    assert (record["state"], record["reason"], record["notes"]) == (state, reason, [])


def test_a_counter_that_went_down_is_no_figure(monkeypatch):
    monkeypatch.setattr(node_energy, "step_reading", lambda step: {"unix": 170.0, "joules": 3})
    record = end({**MEASURED, "state": "begun"})
    assert record["state"] == "failed"
    assert record["reason"] == "step 12.extern's energy went down (500 J -> 3 J): its meter restarted"


def test_show_prints_the_figure_and_the_reason(tmp_path, capsys):
    write(tmp_path / "measured.json", MEASURED)
    write(tmp_path / "none.json", {**begin({}, "none"), "notes": ["a, note"]})
    assert main(["show", str(tmp_path / "measured.json")]) == 0
    assert main(["show", str(tmp_path / "none.json")]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "CARAML node energy: state=measured wh=16.6667 scope=node window=job "
        "source=slurm-acct_gather_energy/pm_counters nodes=cn1+cn2 duration_s=60",
        "CARAML node energy: state=none wh=- scope=- window=job source=- nodes=- duration_s=-",
        "CARAML node energy note: the job ran outside Slurm (submit mode local): no Slurm energy "
        "accounting meters its node",
        "CARAML node energy note: a; note"]


def test_a_file_that_cannot_be_written_is_one_warning_line(tmp_path, capsys, monkeypatch):
    """A warning in job.out, not an error: an error line would fail a row whose figures stand."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert main(["begin", str(tmp_path / "gone" / FILE_NAME)]) == 1
    said = capsys.readouterr()
    assert said.err == ""
    assert said.out.count("\n") == 1
    assert said.out.startswith("CARAML warning: cannot record the job's node energy in ")
    assert "the rest of the job's results stand" in said.out


def test_the_end_without_a_start_reading_says_so(tmp_path):
    assert main(["end", str(tmp_path / FILE_NAME)]) == 0
    energy = read_node_energy(tmp_path / FILE_NAME)
    assert energy.state == "failed" and energy.reason == "the job script took no reading at its start"
    assert json.loads((tmp_path / FILE_NAME).read_text())["format"] == FORMAT
