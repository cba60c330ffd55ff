"""The nodes' energy in the row: read once from the job's node_energy.json
(caraml/job/node_energy.py) where the row is decided, beside jpwr's
figures and never added to them, with its state, source, scope and
window; the accelerators' share of a node's energy where jpwr measured
both over one window; and the row's renderings (the full table, row.json,
the history) holding it."""

from __future__ import annotations

import csv
import io
import json
import sqlite3

import pytest

from caraml.job.node_energy import FILE_NAME, FORMAT
from caraml.row import full_table, history, row_json
from caraml.row.decide import decide_row
from caraml.row.evidence import gather
from tests.caraml.row_packages import JPWR, START, execute, finished_job, run_dir, write

# a two-node job's file as the job script leaves it: 60 kJ over 60 s
MEASURED = {"format": FORMAT, "window": "job", "declared": "pm_counters", "notes": [], "job_id": "12",
            "source": "slurm-acct_gather_energy/pm_counters", "scope": "node", "nodes": ["cn1", "cn2"],
            "state": "measured", "step": "12.extern", "begin": {"unix": 100.0, "joules": 500},
            "end": {"unix": 160.0, "joules": 60500}, "duration_s": 60.0, "energy_j": 60000,
            "energy_wh": 60000 / 3600, "mean_w": 1000.0}
# jpwr on an HPE Cray EX node: the GPUs' sensors, pm_counters' accelerators and its node
JPWR_WITH_NODE = JPWR.replace("jpwr-scopes: gpu=40.0 module=48.0",
                              "jpwr-scopes: gpu=40.0 accelerator=42.0 node=70.0 cpu-domain=12.0")


def decide(tmp_path, node_file=None, *, params=None, jpwr=JPWR, job_out=None):
    work = execute(run_dir(tmp_path, {"nodes": "2", **(params or {})}))
    write(work, job_out=finished_job() if job_out is None else job_out)
    if node_file is not None:
        (work / FILE_NAME).write_text(node_file if isinstance(node_file, str) else json.dumps(node_file))
    out, err = tmp_path / "jpwr.out", tmp_path / "jpwr.err"
    out.write_text(jpwr)
    err.write_text("")
    return decide_row("llm", gather(work, out, err, 0), slurm_state=lambda job_id: None)


def test_a_measured_node_figure_is_the_rows_own_with_its_scope_window_and_source(tmp_path):
    row = decide(tmp_path, MEASURED)
    assert (row.node_energy_state, row.node_energy_scope, row.node_energy_window) == (
        "measured", "node", "job")
    assert row.node_energy_source == "slurm-acct_gather_energy/pm_counters"
    assert row.node_wh == pytest.approx(60000 / 3600) and row.node_window_s == 60.0
    assert row.node_power_w_per_node == pytest.approx(500.0)  # 1000 W over the job's two nodes
    # the job's work over the job's node energy; jpwr's accelerator figures stay as they were
    work = row.work_per_wh_run * row.wh_run
    assert row.work_per_node_wh == pytest.approx(work / row.node_wh)
    assert row.wh_run == 40.0 and row.energy_scope == "gpu"
    assert row.node_energy_reason is None and row.measurement


@pytest.mark.parametrize("node_file, state, reason", [
    (None, "missing", "does not exist: the job recorded no node energy"),
    ("{half", "unreadable", "is not readable JSON"),
    ({"format": FORMAT, "window": "job", "state": "none", "notes": [],
      "reason": "the cluster meters no node: its AcctGatherEnergyType is acct_gather_energy/none"},
     "none", "the cluster meters no node"),
    ({**MEASURED, "state": "begun"}, "incomplete", "the job ended before its node energy was read"),
])
def test_a_row_without_a_node_figure_says_why_and_never_estimates_one(tmp_path, node_file, state, reason):
    row = decide(tmp_path, node_file)
    assert row.node_energy_state == state and reason in row.node_energy_reason
    assert (row.node_wh, row.work_per_node_wh, row.node_power_w_per_node) == (None, None, None)
    assert row.measurement  # the accelerators' figures are whole: the row stands


def test_a_meter_of_another_scope_is_no_node_figure(tmp_path):
    rapl = {**MEASURED, "source": "slurm-acct_gather_energy/rapl", "scope": "cpu-socket+dram"}
    row = decide(tmp_path, rapl)
    assert row.node_energy_state == "measured" and row.node_energy_scope == "cpu-socket+dram"
    assert row.node_wh is None and row.work_per_node_wh is None
    assert row.node_energy_reason == ("slurm-acct_gather_energy/rapl meters scope cpu-socket+dram, not whole "
                                      "nodes: the row has no node figure")


def test_the_jobs_notes_on_its_meter_are_in_the_row(tmp_path):
    note = ("platform.xml declares node meter none for this system but the cluster's AcctGatherEnergyType "
            "is pm_counters: fix node_meter in platform.xml or ask the centre")
    row = decide(tmp_path, {**MEASURED, "declared": "none", "notes": [note]})
    assert row.node_wh == pytest.approx(60000 / 3600) and row.node_energy_reason == note


def test_a_failed_job_keeps_its_node_energy_but_no_work_per_node_wh(tmp_path):
    row = decide(tmp_path, MEASURED, job_out=START + "\nCARAML job: end=2026-11-24T05:10:00+00:00 status=1\n")
    assert row.state == "failed"
    assert row.node_wh == pytest.approx(60000 / 3600) and row.work_per_node_wh is None


def test_the_accelerators_share_of_the_node_comes_from_jpwrs_node_scope_over_the_run(tmp_path):
    row = decide(tmp_path, MEASURED, jpwr=JPWR_WITH_NODE)
    # the node meter's own accelerator channels before the GPUs' sensors
    assert row.accelerator_share_of_node_pct == pytest.approx(100 * 42.0 / 70.0)
    assert row.accelerator_share_basis == "accelerator/node(run)"
    gpus_only = decide(tmp_path / "b", MEASURED, jpwr=JPWR_WITH_NODE.replace(" accelerator=42.0", ""))
    assert gpus_only.accelerator_share_of_node_pct == pytest.approx(100 * 40.0 / 70.0)
    assert gpus_only.accelerator_share_basis == "gpu/node(run)"


def test_no_share_where_jpwr_measured_no_node_scope(tmp_path):
    # Slurm's node figure covers the job, jpwr's accelerators the run: two windows, no share
    row = decide(tmp_path, MEASURED)
    assert row.node_wh is not None
    assert (row.accelerator_share_of_node_pct, row.accelerator_share_basis) == (None, None)


def test_the_full_table_row_json_and_history_hold_the_node_figure(tmp_path):
    row = decide(tmp_path, {**MEASURED, "notes": ["a note, with a comma"]}, jpwr=JPWR_WITH_NODE)
    assert row_json.from_json(row_json.to_json(row)) == row
    run = tmp_path / "000000"
    row_json.write(row, execute(run))
    [line] = list(csv.DictReader(io.StringIO(full_table.table(run))))
    assert float(line["NodeEnergy(Wh)"]) == pytest.approx(60000 / 3600, rel=1e-4)
    assert (line["NodeEnergyScope"], line["NodeEnergyWindow"], line["NodeEnergyState"]) == ("node", "job",
                                                                                           "measured")
    assert line["NodeEnergySource"] == "slurm-acct_gather_energy/pm_counters"
    assert float(line["NodeMeanPower/node(W)"]) == pytest.approx(500.0)
    assert float(line["AcceleratorShareOfNode(%)"]) == pytest.approx(60.0)
    assert line["AcceleratorShareBasis"] == "accelerator/node(run)"
    # the note whole, as the reason is (one line, its commas semicolons: JUBE's rule for a value)
    assert line["NodeEnergyNote"] == "a note; with a comma"
    db = tmp_path / "history.sqlite"
    history.write(row, execute(run), db)
    con = sqlite3.connect(db)
    [(wh, window, share)] = con.execute(
        "select node_wh, node_energy_window, accelerator_share_of_node_pct from history").fetchall()
    con.close()
    assert (wh, window, share) == (pytest.approx(60000 / 3600), "job", pytest.approx(60.0))


def test_a_row_json_from_before_node_energy_reads_without_it(tmp_path):
    row = decide(tmp_path, MEASURED)
    data = {k: v for k, v in row_json.to_dict(row).items()
            if not k.startswith(("node_", "work_per_node", "accelerator_share"))}
    old = row_json.from_dict(data)
    assert (old.node_energy_state, old.node_wh) == (None, None) and old.per_s == row.per_s
