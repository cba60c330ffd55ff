"""Slurm's signals to a running two-node job (tests/slurm_cluster.py): the
warning ahead of the time limit (`#SBATCH --signal=B:USR1@N` sends USR1 to
the batch shell alone; `scancel --batch --signal=USR1` does the same) and
scancel (TERM to every process, the batch shell's written down). Either way the ranks on both nodes finish
their iteration, the run prints its summary and stop reason, and every rank
writes its energy file. Before aux/job.sh.in forwarded the warning through
Slurm, the batch shell sent TERM to srun, which killed the step (status 137,
no summary, no energy file)."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.multinode_runs import (
    LLM_PROGRESS,
    LLM_SCRIPT,
    combined_energy,
    job_id,
    jube_run,
    submitted_row,
    wait_for_line,
)

pytestmark = [pytest.mark.jube, pytest.mark.slurm]


def signal_while_training(tmp_path, cluster, system: str, *scancel_args: str):
    """Starts the LLM run, sends the signal once both nodes train, and
    returns the run and its execute work directory when the job has ended."""
    run = jube_run(tmp_path, LLM_SCRIPT, cluster)
    run.run(system, "synthetic")
    work = run.work_dirs("execute")[0]
    planned = int(wait_for_line(work / "job.out", LLM_PROGRESS).group(1))
    subprocess.run(["scancel", *scancel_args, job_id(work)], env=cluster.env, check=True)
    cluster.wait_for_jobs(timeout_s=300)
    return run, work, planned


def iterations_run(out: str) -> int:
    return int(re.search(r"^CARAML global: .*\biterations_total=(\d+)", out, re.MULTILINE).group(1))


def check_both_ranks_wrote_their_files(run, work) -> None:
    energy = work / "energy"
    assert sorted(p.name for p in energy.glob("energy_rank*.csv")) == ["energy_rank0.csv",
                                                                       "energy_rank1.csv"]
    table = combined_energy(run)
    assert sorted(table.loc[table["counted"], "host"]) == ["cn1", "cn2"]
    assert set(table["origin"]) == {"energy file"}


@pytest.mark.parametrize("system", ["CPU2N", "CPU2NT"])
def test_the_time_limit_warning_stops_both_nodes_with_their_results(tmp_path, slurm2n, system):
    run, work, planned = signal_while_training(tmp_path, slurm2n, system, "--batch", "--signal=USR1")
    out = (work / "job.out").read_text()
    assert "CARAML stop: signal SIGUSR1" in out
    assert "CARAML job: end=" in out and " status=0" in out
    row = submitted_row(run.table())
    # a success that says it was cut short, and why
    # the cause: the stop first, then the verdict on a run cut short before its window
    assert (row["Status"], row["Error"].split("; ")[0]) == ("ok-stopped-early", "signal SIGUSR1"), \
        row.to_dict()
    assert row["Error"].split("; ")[1].startswith("not a measurement ("), row.to_dict()
    # stopped early, with a figure from the iterations it timed
    assert iterations_run(out) < planned
    assert row["Iterations"] > 0 and row["Tokens/s"] > 0
    check_both_ranks_wrote_their_files(run, work)
    assert row["Energy(Wh)"] > 0


def test_scancel_stops_both_nodes_at_the_end_of_an_iteration(tmp_path, slurm2n):
    run, work, planned = signal_while_training(tmp_path, slurm2n, "CPU2N")
    out = (work / "job.out").read_text()
    assert "CARAML stop: signal SIGTERM" in out
    assert iterations_run(out) < planned
    row = submitted_row(run.table())
    # the TERM reached the batch shell too, which wrote it down: the same
    # status as a TERM to the ranks alone, a measurement cut short
    assert (work / "signal").read_text().split()[0] == "SIGTERM"
    # the cause: the stop first, then the verdict on a run cut short before its window
    assert (row["Status"], row["Error"].split("; ")[0]) == ("ok-stopped-early", "signal SIGTERM"), \
        row.to_dict()
    assert row["Error"].split("; ")[1].startswith("not a measurement ("), row.to_dict()
    assert row["Iterations"] > 0
    check_both_ranks_wrote_their_files(run, work)
    assert row["Energy(Wh)"] > 0
