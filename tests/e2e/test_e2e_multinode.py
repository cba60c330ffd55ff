"""Both benchmarks across the two nodes of the namespaced test cluster
(tests/slurm_cluster.py: cn1 and cn2, each with its own host name and
address), through the job template and launch path of the HPC systems:
CPU2N (srun starts torchrun once per node, c10d rendezvous across the
nodes), CPU2NT (one Slurm task per device, JEDI's path), and a rank killed
on one node."""

from __future__ import annotations

import json
import re

import pytest

from tests.multinode_runs import (
    IC_SCRIPT,
    LLM_PROGRESS,
    LLM_SCRIPT,
    combined_energy,
    jube_run,
    kill,
    rank_processes,
    submitted_row,
    wait_for_line,
)

pytestmark = [pytest.mark.jube, pytest.mark.slurm]


def launch_line(work) -> str:
    """The job script's one srun line, which starts the benchmark on every node."""
    lines = [ln for ln in (work / "job.sh").read_text().splitlines() if ln.startswith("srun ")]
    assert len(lines) == 1, lines
    return lines[0]


def check_energy_of_both_nodes(run, row) -> None:
    """Each node's own channels counted once, and the row's total is their sum."""
    work = run.work_dirs("execute")[0]
    hosts = {json.loads(p.read_text())["host"] for p in (work / "energy").glob("meta_rank*.json")}
    assert hosts == {"cn1", "cn2"}
    table = combined_energy(run)
    counted = table[table["counted"]]
    assert sorted(counted["host"]) == ["cn1", "cn2"]
    assert row["Energy(Wh)"] == pytest.approx(counted["energy_wh"].sum(), rel=1e-3)
    # the row shows each node's part
    by_node = dict(kv.split("=") for kv in row["EnergyByNode(Wh)"].split(";"))
    assert sorted(by_node) == ["cn1", "cn2"]
    for host, wh in by_node.items():
        assert float(wh) == pytest.approx(counted.loc[counted["host"] == host, "energy_wh"].sum(), rel=1e-3)


def test_image_classification_across_two_nodes_with_torchrun_on_each(tmp_path, slurm2n):
    run = jube_run(tmp_path, IC_SCRIPT, slurm2n)
    row = run.run_through_slurm(slurm2n, "CPU2N", "smoke").iloc[0]
    assert row["Status"] == "ok", row.to_dict()
    assert (row["System"], row["Nodes"], row["Devices"]) == ("CPU2N", 2, 2)
    work = run.work_dirs("execute")[0]
    job = (work / "job.sh").read_text()
    assert "#SBATCH --nodes=2\n" in job and "#SBATCH --ntasks-per-node=1\n" in job
    launch = launch_line(work)
    assert "-m torch.distributed.run --nnodes=2 --nproc-per-node=1 " in launch
    assert "--rdzv-backend=c10d" in launch
    out = (work / "job.out").read_text()
    # the ranks found two distinct hosts; the figure counts the global batch
    # of all ranks per iteration of the slowest rank
    glob = re.search(r"^CARAML global: (.*)$", out, re.MULTILINE).group(1)
    fields = dict(kv.split("=") for kv in glob.split())
    assert (fields["nodes"], fields["devices"]) == ("2", "2")
    assert row["Images/s"] == pytest.approx(8 / float(fields["time_per_iteration_s"]), rel=1e-3)
    per_rank = [float(v) for v in re.findall(r"^CARAML rank \d+: images_per_s_mean=(\S+)", out, re.MULTILINE)]
    assert len(per_rank) == 2
    assert row["Images/s"] <= 2 * min(per_rank) * (1 + 1e-3)
    check_energy_of_both_nodes(run, row)


def test_llm_across_two_nodes_with_one_slurm_task_per_device(tmp_path, slurm2n):
    run = jube_run(tmp_path, LLM_SCRIPT, slurm2n)
    row = run.run_through_slurm(slurm2n, "CPU2NT", "smoke", "synthetic").iloc[0]
    assert row["Status"] == "ok", row.to_dict()
    assert (row["System"], row["Nodes"], row["Devices"], row["DP"]) == ("CPU2NT", 2, 2, 2)
    assert row["Tokens/s"] > 0
    work = run.work_dirs("execute")[0]
    launch = launch_line(work)
    # the Slurm task is the rank: no torchrun
    assert "torch.distributed.run" not in launch
    assert "-m llm_training.pretrain_gpt " in launch
    check_energy_of_both_nodes(run, row)


def test_a_rank_killed_on_one_node_ends_the_job_on_both(tmp_path, slurm2n):
    run = jube_run(tmp_path, LLM_SCRIPT, slurm2n)
    run.run("CPU2N", "synthetic")
    work = run.work_dirs("execute")[0]
    wait_for_line(work / "job.out", LLM_PROGRESS)
    ranks = rank_processes(slurm2n, "cn2", "llm_training.pretrain_gpt")
    assert ranks, "no training process on cn2"
    kill(ranks)
    # torchrun on cn2 reports the failure, srun ends the task on cn1; a
    # job waiting for a rendezvous or collective timeout would outlast this
    slurm2n.wait_for_jobs(timeout_s=120)
    row = submitted_row(run.table())
    assert row["Status"] == "failed", row.to_dict()
    # the rank that died first and its node (caraml/job/failure.py, from torchrun's summary)
    assert "rank 1 killed by SIGKILL on cn2" in row["Error"], row["Error"]
    assert "CARAML global:" not in (work / "job.out").read_text()
    # the killed rank's flushed samples still count, beside rank 0's energy file
    table = combined_energy(run)
    origin = dict(zip(table["host"], table["origin"]))
    assert origin["cn1"] == "energy file" and origin["cn2"].startswith("flushed samples")
