"""The job's node energy from Slurm's energy accounting, on real Slurm
clusters (tests/conftest.py): a two-node job through the job flow
(caraml/login/jobplan.py, aux/job.sh.in) on nodes whose slurmd reads
HPE Cray pm_counters driven at a known power, beside jpwr's own
pm_counters reading of the same nodes; a ReFrame check on those nodes,
whose perflog holds the nodes' Wh with the centre's references; a cluster
that meters no node; and a meter that never answers."""

from __future__ import annotations

import json
import re
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


# A centre's own check on its metered partition: the suite's operator
# check with a bound on the nodes' Wh, written the ReFrame way
CENTRE_NODE_CHECK = f"""
import reframe as rfm
from reframe.utility import import_module_from_file

caraml = import_module_from_file({str(ROOT / "regression" / "checks" / "caraml_checks.py")!r})


@rfm.simple_test
class CentreNodeEnergy(caraml.Caraml_operator):
    reference = {{"centre:metered": {{"node_wh": (1e-6, None, 0.0)}}}}
"""


@pytest.mark.jube
def test_reframe_on_a_node_metered_partition_logs_the_nodes_wh_and_applies_references(
        tmp_path, metered_slurm2n):
    """A ReFrame run on the two metered nodes (CPU2N, a measurement): the
    nodes' Wh and the work per node-Wh are performance variables in the
    perflog, Slurm's figure as the row has it; the centre's references of
    both apply (the file's work per node-Wh, the subclass's bound on the
    Wh, which the run misses); the perflog names the tags that ran."""
    from tests.regression.test_reframe_runs import _reframe, _reframe_columns

    config = tmp_path / "centre.py"
    config.write_text("""
site_configuration = {
    "systems": [{"name": "centre", "descr": "a login node", "hostnames": [".*"],
                 "partitions": [{"name": "metered", "scheduler": "squeue", "launcher": "srun",
                                 "environs": ["gnu"], "extras": {"caraml_tags": ["CPU2N"]}}]}],
    "environments": [{"name": "gnu"}],
}
""")
    checks = tmp_path / "centre_checks.py"
    checks.write_text(CENTRE_NODE_CHECK)
    refs = tmp_path / "refs.yaml"
    refs.write_text("references:\n"
                    "  - {system: CPU2N, benchmark: operator, model: FNO rbc2d-small,"
                    " figure: work_per_node_wh, value: 1, lower: 0.5, upper: 1000000000,"
                    " kind: measured by this suite, source: a test}\n")
    prefix = tmp_path / "rfm"
    # docs/reframe.md's steps 4 and 5: a dry run, then the run
    args = ["-c", str(checks), "-n", "CentreNodeEnergy", "-S", "valid_prog_environs=gnu",
            "-S", f"references_file={refs}", "-S", "suite_references=false", "-S", "extra_tags=measure"]
    dry = _reframe(prefix, "--dry-run", *args, config=config, env=metered_slurm2n.env)
    assert dry.returncode == 0 and not list(prefix.rglob("perflogs/**/*.log")), dry.stdout[-3000:]
    done = _reframe(prefix, "-r", *args, config=config, env=metered_slurm2n.env)
    assert "Failing phase: performance" in done.stdout, done.stdout[-4000:]
    assert re.search(r"failed to meet reference\(s\): node_wh=\S+ Wh of the nodes \(node, job window, "
                     r"slurm-acct_gather_energy/pm_counters\), expected 1e-06", done.stdout), \
        done.stdout[-3000:]
    [record] = _reframe_columns(prefix / "perflogs" / "centre" / "metered" / "CentreNodeEnergy.log")
    assert record["caraml_measurement"] == "yes" and record["caraml_tags"] == "CPU2N rbc2d smoke measure"
    # the check's row beside its job script (its JUBE plan's own dry run lies below)
    [row_json] = [p for folder in ("stage", "output") for p in (prefix / folder).rglob("row.json")
                  if (p.parent / "job.sh").exists()]
    row = json.loads(row_json.read_text())
    assert (row["node_energy_state"], row["node_energy_scope"]) == ("measured", "node")
    # Slurm's figure of both nodes over the job, as the row has it; the run's samples over it
    assert float(record["node_wh_value"]) == pytest.approx(row["node_wh"], rel=1e-5)
    assert float(record["node_wh_value"]) == pytest.approx(
        sum(NODE_WATTS.values()) * row["node_window_s"] / 3600, rel=0.02)
    assert (record["node_wh_ref"], record["node_wh_upper_thres"]) == ("1e-06", "0.0"), record
    # the file's work per node-Wh applies and is met: it is not among the failures
    assert float(record["samples_per_node_wh_value"]) == pytest.approx(row["work_per_node_wh"], rel=1e-5)
    assert (record["samples_per_node_wh_ref"], record["samples_per_node_wh_lower_thres"]) == ("1.0", "-0.5")
    assert "samples_per_node_wh=" not in done.stdout.split("failed to meet reference(s):")[1]
