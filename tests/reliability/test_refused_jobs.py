"""A job Slurm will not run is named, never left `queued` without a cause:
sbatch's refusal (an account a partition's AllowAccounts leaves out, a
partition that is not there, a time limit over the partition's, under
EnforcePartLimits=ALL) fails the row with sbatch's own words and the fix,
and the main command exits 1; a job Slurm took that can never start by
waiting (the same account or limit under EnforcePartLimits=NO) ends the
wait. On real one-node Slurm clusters (tests/conftest.py)."""

from __future__ import annotations

import subprocess
import time

import pytest

from caraml.login import follow, jobplan
from caraml.row.decide import decide_row
from caraml.row.evidence import gather
from tests.caraml.row_packages import execute, run_dir
from tests.checkouts import SMOKE_JOBS, checkout_with_venv, main_command
from tests.systems.test_jobplan import write_facts

pytestmark = pytest.mark.slurm

REFUSED = [
    ({"account": "beta"}, "Invalid account or account/partition combination specified",
     "submit with an account that may use partition (the default): set CARAML_ACCOUNT"),
    ({"partition": "nosuch"}, "Invalid partition name specified",
     "fix the partition 'nosuch' of CPU in platform.xml"),
    ({"partition": "short", "job_timelimit": "01:00:00"},
     "Requested time limit is invalid (missing or exceeds some limit)",
     "lower the time limit 01:00:00 to at most the partition's MaxTime (scontrol show partition short)"),
]


def submitted(tmp_path, cluster, monkeypatch, capsys, **facts):
    """jobplan's submit of a job with these facts on the cluster, from a
    work package: (status, stdout, stderr, the work package)."""
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    work = execute(run_dir(tmp_path))
    work.mkdir(parents=True, exist_ok=True)
    facts_file = write_facts(work / "job.facts", submit_mode="slurm", cpus_per_task="1", **facts)
    status = jobplan.main(["submit", str(facts_file)])
    out, err = capsys.readouterr()
    return status, out, err, work


@pytest.mark.parametrize("facts, said, fix", REFUSED)
def test_sbatchs_refusal_fails_the_row_with_its_words_and_the_fix(
        tmp_path, strict_slurm, monkeypatch, capsys, facts, said, fix):
    status, out, err, work = submitted(tmp_path, strict_slurm, monkeypatch, capsys, **facts)
    assert status != 0 and "Submitted batch job" not in out
    assert err.count("\n") == 1, err
    assert err.startswith(f"CARAML ERROR: sbatch refused the job: {said}; {fix}"), err
    # the row names it (JUBE keeps the step's stderr in the work package)
    (work / "stderr").write_text(err)
    row = decide_row("image", gather(work), slurm_state=None)
    assert row.state == "failed" and said in row.reason, row.reason


def test_a_job_sbatch_takes_is_submitted_as_before(tmp_path, strict_slurm, monkeypatch, capsys):
    status, out, err, _ = submitted(tmp_path, strict_slurm, monkeypatch, capsys, partition="short",
                                 job_timelimit="00:01:00", job_command="--version")
    assert status == 0 and out.startswith("Submitted batch job "), out + err
    subprocess.run(["scancel", out.split()[-1]], env=strict_slurm.env, check=False)


def pending_reasons(cluster, job_id: str, wanted: str, timeout_s: float = 30) -> list[str]:
    """Slurm's reasons for a pending job, each new one as it came, until one
    starts with `wanted`."""
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while time.monotonic() < deadline:
        reason = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%r"], env=cluster.env,
                                capture_output=True, text=True).stdout.strip()
        if reason not in ("", "None", *seen[-1:]):
            seen.append(reason)
        if reason.startswith(wanted):
            return seen
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} got no reason {wanted} within {timeout_s:.0f} s: {seen}")


@pytest.mark.parametrize("options, starts_with", [
    (["--account=beta"], "Job's account not known"),
    (["--partition=short", "--time=01:00:00"], "PartitionTimeLimit"),
])
def test_a_pending_reason_waiting_cannot_clear_ends_the_wait(tmp_path, lenient_slurm, options,
                                                             starts_with):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    job_id = subprocess.run(["sbatch", "--parsable", f"--output={tmp_path}/out", *options,
                             str(script)], env=lenient_slurm.env, capture_output=True,
                            text=True, check=True).stdout.strip()
    try:
        reasons = pending_reasons(lenient_slurm, job_id, starts_with)
    finally:
        subprocess.run(["scancel", job_id], env=lenient_slurm.env, check=False)
    # each reason Slurm gave on the way ends the wait (PartitionConfig comes first at times)
    assert all(follow.cannot_start(reason, others_running=True) for reason in reasons), reasons


@pytest.mark.jube
def test_the_main_command_names_a_refused_account_and_exits_1(tmp_path, strict_slurm):
    """The issue's case: the rows read `queued` with no cause and the
    command exited 0; sbatch's message was only in a work folder."""
    checkout = checkout_with_venv(tmp_path / "repo")
    start = time.monotonic()
    proc = main_command(checkout, "CPU", "smoke", "slurm", timeout=900,
                        env={**strict_slurm.env, "CARAML_ACCOUNT": "beta", "CARAML_PACE_S": "5"})
    took = time.monotonic() - start
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-4000:]
    named = [ln for ln in out.splitlines() if ln.startswith("CARAML: row ")
             and "failed: sbatch refused the job: Invalid account" in ln]
    assert len(named) == sum(SMOKE_JOBS.values()), out[-4000:]
    assert not subprocess.run(["squeue", "-h"], env=strict_slurm.env, capture_output=True,
                              text=True).stdout.strip()
    print(f"main command with every job refused: {took:.0f} s")
