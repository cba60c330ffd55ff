"""A job Slurm requeues (`scontrol requeue`, a node that failed) is decided
by its last attempt: the attempt Slurm stopped leaves no marker that the
job ended (so `jube continue` does not decide the row from it), keeps its
cause in job.out, and the row of the attempt that ran to its end is
`requeued(1)` with that cause beside it. The image benchmark's CPU smoke
job through the session's real Slurm cluster, requeued while it trains."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.jpwr.jpwr_fakes import wait_for
from tests.jube_runs import JubeRun

pytestmark = pytest.mark.jube
SCRIPT = "image_classification/image_classification_torch_benchmark.xml"


def test_a_requeued_job_is_its_last_attempts_row_with_the_first_attempts_cause(slurm, tmp_path):
    run = JubeRun(SCRIPT, tmp_path / "run", env=slurm.env)
    run.run("CPU", "smoke", "slurm")
    work = run.work_dirs("execute")[0]
    job_id = re.search(r"Submitted batch job (\d+)", (work / "stdout").read_text()).group(1)
    job_out = work / "job.out"
    wait_for(lambda: job_out.exists() and "CARAML job: start=" in job_out.read_text(), "the job's start",
             timeout_s=600)
    # requeued and held in the queue until the test has looked at the run between its attempts
    subprocess.run(["scontrol", "requeuehold", job_id], env=slurm.env, check=True)
    wait_for(lambda: "CARAML job requeued: " in job_out.read_text(), "the first attempt's end", timeout_s=600)
    assert not (work / "ready").exists(), "the stopped attempt marked the job as ended"
    between = run.table().iloc[0]
    assert between["Status"] in ("queued", "pending"), between.to_dict()
    assert "requeued by Slurm after: job exited with status" in between["Error"], between["Error"]
    assert run.status() != "FINISHED"
    subprocess.run(["scontrol", "release", job_id], env=slurm.env, check=True)
    # Slurm waits two minutes before a requeued job may start again
    subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], env=slurm.env, check=True)
    row = run.after_slurm(slurm).iloc[0]
    text = job_out.read_text()
    assert text.count("CARAML job: start=") == 2 and " requeued=1" in text
    assert row["Status"] == "ok", row.to_dict()
    assert "requeued(1)" in row["Flags"]
    decided = json.loads(next(run.run_dir.glob("*_combine_energy/work/row.json")).read_text())
    fields = decided.get("row", decided)
    assert fields["requeued"] == 1
    assert fields["first_attempt_cause"].startswith("job exited with status "), fields["first_attempt_cause"]
    assert "Slurm cancelled it on " in fields["first_attempt_cause"] and "job requeue" in fields[
        "first_attempt_cause"]
