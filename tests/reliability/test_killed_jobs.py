"""A job script that is killed, stopped or run again: every process it
started dies with it, its error file names the signal, a re-run does not
keep the last run's error, and the energy of a stopped job is combined.
The job scripts are the real ones of a CPU dry run, started by hand the
way the `local` submit mode starts them."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from caraml import jobwatch
from tests.jube_runs import JubeRun

pytestmark = pytest.mark.jube
SCRIPT = "image_classification/image_classification_torch_benchmark.xml"
WORKER = "-m image_classification.image_classification_torch"


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> JubeRun:
    run = JubeRun(SCRIPT, tmp_path_factory.mktemp("killed") / "run", env=dict(os.environ))
    run.run("CPU", "dryrun")
    return run


def _start(work: Path) -> subprocess.Popen:
    out, err = (work / "job.out").open("w"), (work / "job.err").open("w")
    return subprocess.Popen(["bash", "job.sh"], cwd=work, stdout=out, stderr=err,
                            start_new_session=True)


def _wait_for(condition, what: str, timeout_s: float = 300):
    deadline = time.monotonic() + timeout_s
    while not (found := condition()):
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.2)
    return found


def _training(job: subprocess.Popen) -> set[jobwatch.Process]:
    """The job's processes, once a training worker is among them."""
    def worker_up():
        procs = jobwatch.descendants(job.pid)
        cmdlines = [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    for pid, _ in procs if jobwatch.alive((pid, _))]
        return procs if any(WORKER in c and "torch.distributed.run" not in c for c in cmdlines) else None
    return _wait_for(worker_up, "a training worker")


def test_a_killed_job_script_takes_its_processes_with_it_and_says_so(dry_run):
    work = dry_run.work_dirs("execute")[0]
    job = _start(work)
    processes = _training(job)
    job.send_signal(signal.SIGKILL)
    job.wait()
    _wait_for(lambda: (work / "ready").exists(), "the done marker")
    # SIGKILL is sent by then; a loaded host may take a moment to end them
    _wait_for(lambda: not [p for p in processes if jobwatch.alive(p)], "the killed job's processes to end",
              timeout_s=60)
    assert (work / "error").read_text().startswith(
        "job exited with status 137 (SIGKILL): the job script was killed")
    assert "CARAML global:" not in (work / "job.out").read_text()


def test_a_rerun_leaves_no_error_of_the_last_run(dry_run):
    work = dry_run.work_dirs("execute")[0]
    (work / "error").write_text("job exited with status 130 (SIGINT)\n")
    assert _start(work).wait(timeout=600) == 0
    assert (work / "ready").exists() and not (work / "error").exists()
    assert "CARAML global:" in (work / "job.out").read_text()


def test_a_stopped_job_names_the_signal_and_its_energy_is_combined(dry_run):
    work = dry_run.work_dirs("execute")[1]
    job = _start(work)
    _training(job)
    # stop once jpwr has flushed power samples to disk
    power = work / "energy" / "power_rank0.csv"
    _wait_for(lambda: power.exists() and len(power.read_text().splitlines()) > 10, "flushed power samples")
    job.send_signal(signal.SIGTERM)
    job.wait(timeout=300)
    assert "SIGTERM" in (work / "error").read_text()
    assert (work / "ready").exists()
    # a dry run's steps end once its scripts are written, combine_energy too:
    # it combines again by hand what this job measured
    dry_run.combine_again(work)
    table = dry_run.table()
    row = table[table["GlobalBatchSize"] == 16].iloc[0]
    assert row["Energy(Wh)"] > 0, row.to_dict()
