"""A job script that is killed, stopped or run again: every process it
started dies with it, its error file names the signal, a re-run does not
keep the last run's error, and the energy of a stopped job is combined.
The job scripts are the real ones of a CPU dry run, started by hand the
way the `local` submit mode starts them."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from caraml.job import watch
from caraml.login.host_locks import held, jube_folder_lock
from caraml.row.decide import decide_row
from caraml.row.evidence import gather
from caraml.row.run import rows_of_run
from tests.jube_runs import ROOT, JubeRun
from tests.reliability.small_disk import fill, fill_inodes, small_disk

pytestmark = pytest.mark.jube
SCRIPT = "image_classification/image_classification_torch_benchmark.xml"
WORKER = "-m image_classification.image_classification_torch"
# an iteration past the warm-up: a job stopped after it has a figure
TIMED = re.compile(r"^iteration \d+/\d+: ", re.MULTILINE)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> JubeRun:
    run = JubeRun(SCRIPT, tmp_path_factory.mktemp("killed") / "run", env=dict(os.environ))
    run.run("CPU", "dryrun")
    return run


def _until_stopped(work: Path, budget_min: int | None = None) -> None:
    """The job's training runs until a signal stops it, or its wall-clock
    budget (the plan's, else `budget_min` minutes): 12 CPU iterations could
    all be done before a signal reaches the ranks."""
    for name in ("job.sh", "job.facts"):
        text = (work / name).read_text().replace("--train-iters 12 ", "--train-iters 100000 ")
        assert "--train-iters 100000 " in text, name
        if budget_min is not None:
            text = re.sub(r"--exit-duration-in-mins \d+ ", f"--exit-duration-in-mins {budget_min} ", text)
        (work / name).write_text(text)


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


def _training(job: subprocess.Popen) -> set[watch.Process]:
    """The job's processes, once a training worker is among them."""
    def cmdline(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return ""  # it ended since it was listed (a short-lived helper of the job)

    def worker_up():
        procs = watch.descendants(job.pid)
        cmdlines = [cmdline(pid) for pid, _ in procs]
        return procs if any(WORKER in c and "torch.distributed.run" not in c for c in cmdlines) else None
    return _wait_for(worker_up, "a training worker")


def test_a_killed_job_script_takes_its_processes_with_it_and_says_so(dry_run):
    work = dry_run.work_dirs("execute")[0]
    (work / "stderr").write_text("")  # a submitted job's step: no dry run's marker
    job = _start(work)
    processes = _training(job)
    # the job script wrote the row's lines at its start (the tables' state)
    assert (work / "row.out").read_text().startswith("CARAML row: state=running ")
    job.send_signal(signal.SIGKILL)
    job.wait()
    _wait_for(lambda: (work / "ready").exists(), "the done marker")
    # no trap ran: the watcher wrote them, through the row model, before the done marker
    lines = (work / "row.out").read_text()
    # (the benchmark's own columns, own1.., come before the layout)
    assert re.match(r"CARAML row: state=failed notable=yes (own\d+=\S+ )*layout=1x1 ", lines), lines
    assert " model=resnet18 " in lines.splitlines()[0]
    reason = lines.split("CARAML row reason: ")[1].split("CARAML row flags: ")[0]
    assert " ".join(reason.split()) == (work / "error").read_text().strip().replace(",", ";")
    # SIGKILL is sent by then; a loaded host may take a moment to end them
    _wait_for(lambda: not [p for p in processes if watch.alive(p)], "the killed job's processes to end",
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
    _until_stopped(work)
    job = _start(work)
    _training(job)
    # stop once jpwr has flushed power samples to disk
    power = work / "energy" / "power_rank0.csv"
    _wait_for(lambda: power.exists() and len(power.read_text().splitlines()) > 10, "flushed power samples")
    _wait_for(lambda: TIMED.search((work / "job.out").read_text()), "a timed iteration")
    job.send_signal(signal.SIGTERM)
    job.wait(timeout=300)
    assert "SIGTERM" in (work / "error").read_text()
    assert (work / "ready").exists()
    # a dry run's steps end once its scripts are written, combine_energy too:
    # it combines again by hand what this job measured, and the row model
    # decides its row as a submitted job's (the dry run's line left out)
    (work / "stderr").write_text("")
    dry_run.combine_again(work)
    table = dry_run.table()
    row = table[table["GlobalBatchSize"] == 16].iloc[0]
    assert row["Energy(Wh)"] > 0, row.to_dict()
    # a TERM to the job script stops it as one to a rank would
    assert row["Status"] == "ok-stopped-early", row.to_dict()


@contextlib.contextmanager
def _on_a_small_disk(work: Path, saved: Path) -> Iterator[None]:
    """The dry run's work folder on a small disk of few files (the folder's
    own files copied over), as a submitted job's step: no dry run's marker."""
    shutil.copytree(work, saved, symlinks=True)
    with small_disk(work, size="64m", inodes=200):
        shutil.copytree(saved, work, symlinks=True, dirs_exist_ok=True)
        (work / "stderr").write_text("")
        yield


def test_a_job_that_ends_on_a_full_disk_is_recovered_once_space_returns(dry_run, tmp_path):
    """The job's folder takes no new file from some point of the job on (a
    full disk, a quota of files): the job still leaves its done marker, which
    `jube continue` waits for, and once space is back its row is decided
    from what job.out holds."""
    work = dry_run.work_dirs("execute")[2]
    with _on_a_small_disk(work, tmp_path / "work"):
        # it ends itself after a minute; its folder fills before, once its files are made
        _until_stopped(work, budget_min=1)
        job = _start(work)
        _training(job)
        _wait_for(lambda: TIMED.search((work / "job.out").read_text()), "a timed iteration")
        # the job is held while its folder fills
        os.killpg(job.pid, signal.SIGSTOP)
        try:
            filler = fill_inodes(work)
        finally:
            os.killpg(job.pid, signal.SIGCONT)
        assert job.wait(timeout=600) == 0, (work / "job.err").read_text()[-3000:]
        assert (work / "ready").exists(), "no done marker: jube continue would wait for good"
        # its row's lines could not be written at the end: they say what they said at the start
        assert (work / "row.out").read_text().startswith("CARAML row: state=running ")
        shutil.rmtree(filler)
        # decided from job.out: the run's figures stand; the node figure the full disk cost it is a warning
        assert _decided(work) == ("ok-stopped-early", "wall-clock budget 60 s reached")
        assert "CARAML warning: cannot record the job's node energy" in (work / "job.out").read_text()


def _decided(work: Path) -> tuple[str, str]:
    """The row the model decides for a job that was submitted: the dry run's
    `CARAML dryrun:` line (this job was started by hand) left out."""
    evidence = gather(work)
    evidence.texts["stderr"] = ""
    row = decide_row("image", evidence, slurm_state=None)
    return row.state, row.reason


@pytest.mark.parametrize("sigint", [signal.SIG_DFL, signal.SIG_IGN], ids=["terminal", "background"])
def test_a_ctrl_c_to_a_local_job_stops_it_early_and_its_row_names_sigint(dry_run, sigint):
    """Ctrl-C in the terminal of a local `jube run` sends SIGINT to its whole
    foreground process group: JUBE, the submit step's jobplan.py, the job
    script and the launcher. A `jube run` started in the background of a
    script starts with SIGINT ignored, which the launcher alone undoes."""
    work = dry_run.work_dirs("execute")[0]
    facts = (work / "job.facts").read_text()
    (work / "job.facts").write_text(facts.replace("\ndry_run=yes\n", "\ndry_run=no\n"))
    _until_stopped(work)
    submit = subprocess.Popen([sys.executable, str(Path("caraml/login/jobplan.py").resolve()),
                               "submit", "job.facts"], cwd=work, start_new_session=True,
                              stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
    processes = _training(submit)
    _wait_for(lambda: TIMED.search((work / "job.out").read_text()), "a timed iteration")
    os.killpg(submit.pid, signal.SIGINT)
    _, err = submit.communicate(timeout=300)
    assert submit.returncode == 0, err
    # the job's watcher (caraml/job/watch.py) sees the job script gone within its interval
    _wait_for(lambda: not [p for p in processes if watch.alive(p)],
              "the stopped job's processes to end", timeout_s=30)
    assert (work / "signal").read_text() == "SIGINT\n"
    assert _decided(work) == ("ok-stopped-early", "signal SIGINT")


def test_a_job_script_killed_after_a_signal_names_that_signal(tmp_path):
    (tmp_path / "signal").write_text("SIGINT\n")
    assert watch.ending(tmp_path / "signal", 3).startswith(
        "stopped by SIGINT: the job script was killed before it ended")
    assert watch.ending(tmp_path / "none", 3).startswith(
        "job exited with status 137 (SIGKILL): the job script was killed")


def test_ctrl_c_on_a_local_jube_run_gives_rows_that_name_sigint_and_the_ones_never_begun(tmp_path):
    """Ctrl-C in the terminal of `jube run`: JUBE ends at once; the job it
    was running stops its ranks and writes its figures; the work packages
    JUBE never began are rows of their own, and the main command's check
    exits 1 naming them."""
    out = tmp_path / "run"
    # JUBE parses in the script's folder, which another test worker may use too
    with held(jube_folder_lock(ROOT / SCRIPT)):
        with (tmp_path / "jube.out").open("w") as log:
            jube = subprocess.Popen(["jube", "run", SCRIPT, "--hide-animation", "-o", str(out),
                                     "--tag", "CPU"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    # as a terminal leaves it, whoever started this test
                                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        job_out = out / "000000" / "000000_execute" / "work" / "job.out"
        _wait_for(lambda: job_out.exists() and TIMED.search(job_out.read_text()), "a timed iteration")
        os.killpg(jube.pid, signal.SIGINT)
        jube.wait(timeout=60)
    _wait_for(lambda: (job_out.parent / "ready").exists(), "the stopped job's done marker")
    rows = rows_of_run(out / "000000")
    # the ranks may finish their 12 CPU iterations before the stop reaches
    # them (ok); what was cut short names SIGINT, and nothing names SIGKILL
    assert (rows[0].state, rows[0].reason) in (
        ("ok-stopped-early", "signal SIGINT"), ("ok", "")), (rows[0].state, rows[0].reason)
    assert (job_out.parent / "signal").read_text() == "SIGINT\n"
    assert [(r.state, r.reason.split(":")[0]) for r in rows[1:]] == [
        ("queued", "not started"), ("queued", "not started")]
    done = subprocess.run([sys.executable, "-m", "caraml.login.rows", str(out / "000000")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    named = done.stderr.splitlines()
    assert len(named) == 2 and all("queued: not started" in ln for ln in named), done.stderr


def test_a_local_job_that_ends_on_a_full_disk_waits_for_room_and_keeps_its_row(dry_run, tmp_path):
    """A local job runs inside JUBE's submit step, and what follows it
    (row.out, JUBE's environment file) writes into the job's folder: on a
    full disk JUBE would mark the work package an error for good. The step
    says so and waits for room; once space is back, the row is decided from
    the finished job's output."""
    work = dry_run.work_dirs("execute")[2]
    with _on_a_small_disk(work, tmp_path / "work"):
        facts = (work / "job.facts").read_text()
        (work / "job.facts").write_text(facts.replace("\ndry_run=yes\n", "\ndry_run=no\n"))
        _until_stopped(work, budget_min=1)
        said = tmp_path / "submit.err"  # outside the full folder
        with said.open("w") as err:
            submit = subprocess.Popen([sys.executable, str(Path("caraml/login/jobplan.py").resolve()),
                                       "submit", "job.facts"], cwd=work, start_new_session=True,
                                      stdout=subprocess.DEVNULL, stderr=err,
                                      env={**os.environ, "CARAML_FULL_DISK_WAIT_S": "600"})
        try:
            _training(submit)
            _wait_for(lambda: TIMED.search((work / "job.out").read_text()), "a timed iteration")
            os.killpg(submit.pid, signal.SIGSTOP)  # the job and its step held while the folder fills
            try:
                filler = fill_inodes(work)
            finally:
                os.killpg(submit.pid, signal.SIGCONT)
            _wait_for(lambda: "takes no new file" in said.read_text(), "the step's line on the full folder")
            assert submit.poll() is None, said.read_text()
            shutil.rmtree(filler)
            assert submit.wait(timeout=120) == 0, said.read_text()
        finally:
            if submit.poll() is None:
                os.killpg(submit.pid, signal.SIGKILL)
        assert f"CARAML: {work} takes new files again: going on" in said.read_text()
        lines = (work / "row.out").read_text()
        assert lines.startswith("CARAML row: state=ok-stopped-early "), lines
        assert "wall-clock budget 60 s reached" in lines


def test_waiting_for_room_has_a_deadline_and_says_what_to_do(tmp_path, capsys):
    from caraml.login import room

    with small_disk(tmp_path / "disk", size="64k") as disk:
        fill(disk)
        assert room.lacking(disk) == "No space left on device"
        assert room.wait_for_room(disk, seconds=0.2, pace_s=0.05) is False
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"CARAML: the job has ended, but its folder {disk} takes no new file "
                             "(No space left on device): free space there within 0.00333 min")
    assert err[-1].startswith(f"CARAML ERROR: {disk} took no new file in 0.00333 min: ")
    assert room.lacking(tmp_path) is None


def test_a_wait_for_room_that_is_not_a_number_is_refused_before_the_job(monkeypatch):
    from caraml.login import room

    monkeypatch.setenv(room.WAIT_ENV, "half an hour")
    with pytest.raises(ValueError, match="CARAML_FULL_DISK_WAIT_S='half an hour' is not a number of seconds"):
        room.wait_s()
    monkeypatch.setenv(room.WAIT_ENV, "90")
    assert room.wait_s() == 90.0
