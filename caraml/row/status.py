"""A row's status: the one vocabulary of the suite and the one rule that
picks from it (caraml/row/decide.py calls it; the tables, the README's main command
and caraml-compare read what it decided).

    ok                 a measurement that ran its planned iterations
    ok-stopped-early   a measurement cut short (a signal, the time budget): the reason says
    failed             no measurement: the reason names the cause
    dry-run            the job script was written and checked, not submitted
    queued             submitted, not started (no Slurm to ask, or Slurm knows no reason)
    pending            Slurm holds the job: the reason is Slurm's
    running            started, not ended

A container build job (the container tag) has its own vocabulary, decided
by decide_build: built, failed, dry-run, queued, building.

Standard library only (login node)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from caraml.job.log import START
from caraml.report import WINDOW_REACHED
from caraml.row.evidence import DONE, SIGNAL_FILE, Evidence

STATES = ("ok", "ok-stopped-early", "failed", "dry-run", "queued", "pending", "running")
BUILD_STATES = ("built", "failed", "dry-run", "queued", "building")
# The states of a job that ran to its figures (whether a row is a
# measurement is the verdict's: caraml/row/verdict.py); every other row is
# left out of every figure.
RAN = ("ok", "ok-stopped-early")
# The job script's own error marker, and the suite's one-line errors
_ERROR = re.compile(r"^(?:CARAML ERROR: |(?=job exited with ))(.*)$", re.MULTILINE)
_END = re.compile(r"^CARAML job: end=\S+ status=(-?\d+)", re.MULTILINE)
_STOP = re.compile(r"^CARAML stop: (.*)$", re.MULTILINE)
_SUBMITTED = re.compile(r"^Submitted batch job (\d+)", re.MULTILINE)
_DRY_RUN = re.compile(r"^CARAML dryrun: (.*) written and not submitted$", re.MULTILINE)
_NO_ACCOUNT = re.compile(r"^CARAML warning: no --account line:", re.MULTILINE)


@dataclass(frozen=True)
class Status:
    state: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.state not in STATES + BUILD_STATES:
            raise ValueError(f"unknown row state {self.state!r}")


# what asks Slurm for a job's state and reason (tests give their own)
SlurmState = Callable[[str], "tuple[str, str] | None"]


def slurm_state(job_id: str) -> tuple[str, str] | None:
    """Slurm's state and reason of a job (PENDING, Priority), or None where
    there is no squeue or Slurm no longer knows the job."""
    try:
        done = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T|%r"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    line = done.stdout.strip()
    if done.returncode != 0 or "|" not in line:
        return None
    state, reason = line.split("|", 1)
    return state, reason


def _first_error(ev: Evidence, names: tuple[str, ...] = ("data.stderr", "stderr", "error", "job.err",
                                                         "job.out")) -> str | None:
    # the data step first: the execute step never ran when it failed
    for name in names:
        found = _ERROR.search(ev.texts.get(name, ""))
        if found:
            return found.group(1).strip()
    return None


def _received(ev: Evidence) -> str | None:
    """The first signal that reached the job script, or None."""
    names = ev.texts.get(SIGNAL_FILE, "").split()
    return names[0] if names else None


def _stopped_by(ev: Evidence, signal: str, has_throughput: bool) -> Status | None:
    """A signal that reached the job script gives the row the status the same
    signal gives when it reaches a rank: a measurement stopped early where
    every rank stopped at an iteration's end and the figures were written
    (the launcher's exit status and error only say it was stopped), failed
    naming the signal otherwise."""
    job_out = ev.text("job.out")
    # the suite's own errors (the data step's, the driver's) still fail the row
    own = _first_error(ev, ("data.stderr", "stderr", "job.err", "job.out"))
    if own and not own.startswith("job exited with "):
        return Status("failed", f"stopped by {signal}: {own}")
    if has_throughput and _STOP.search(job_out) and _END.search(job_out):
        return None
    error = _first_error(ev)
    if error is None and not _END.search(job_out):
        return None  # still stopping: running
    error = error or "the job ended before its ranks wrote their figures"
    return Status("failed", error if signal in error else f"stopped by {signal}: {error}")


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _dry_run_reason(job: str, no_account: bool) -> str:
    """The job script's path from the run's folder (<id>/<package>_execute/work/job.sh),
    and the account it lacks where the system refuses such a job."""
    short = "/".join(job.split("/")[-4:])
    if no_account:
        return f"no --account in {short}: export CARAML_ACCOUNT=<project>"
    return f"job script {short} written and not submitted"


def decide_status(ev: Evidence, *, has_throughput: bool,
                  slurm_state: SlurmState | None = slurm_state) -> Status:
    """The status of a work package from its markers, first rule that holds."""
    signal = _received(ev)
    if signal:
        failed = _stopped_by(ev, signal, has_throughput)
        if failed:
            return failed
    error = None if signal else _first_error(ev)
    if error:
        return Status("failed", error)
    planned = ev.text("stderr", "stdout")
    dry_run = _DRY_RUN.search(planned)
    if dry_run:
        return Status("dry-run", _dry_run_reason(dry_run.group(1), bool(_NO_ACCOUNT.search(planned))))
    job_out = ev.text("job.out")
    if not START.search(job_out):
        submitted = _SUBMITTED.search(ev.text("stdout"))
        known = slurm_state(submitted.group(1)) if submitted and slurm_state else None
        if known and known[0] == "PENDING":
            return Status("pending", known[1])
        return Status("queued", "")
    end = _END.search(job_out)
    if not end and ev.texts.get(DONE):
        return Status("failed", "the job ended and job.out lacks its end line: the run folder's "
                                "disk was full or unwritable at the end; free it and run again")
    if not end:
        return Status("running", "")
    if int(end.group(1)) != 0 and not signal:
        return Status("failed", f"job exited with status {end.group(1)}")
    if not has_throughput:
        return Status("failed", "the job ended without a throughput line: see job.out")
    if ev.texts.get("jpwr.status", "0") != "0":
        cause = _last_line(ev.texts.get("jpwr.err", "")) or "no message"
        return Status("failed", f"energy not combined (jpwr combine exited with status "
                                f"{ev.texts['jpwr.status']}): {cause}")
    stops = _STOP.findall(job_out)
    stop = stops[-1].strip() if stops else ""
    if not stop or stop.startswith(("iteration count", WINDOW_REACHED)):
        # a signal that came after the last iteration cut nothing short; a measurement window is planned
        return Status("ok", "")
    # the ranks name the TERM the job script passed on; the signal that came is the script's
    return Status("ok-stopped-early", f"signal {signal}" if signal else stop)


def decide_build(ev: Evidence) -> Status:
    """The status of a container build job (containers/build.sh run by the
    job script): built once the job ended with status 0."""
    error = _first_error(ev)
    end = _END.search(ev.text("job.out"))
    if error:
        return Status("failed", error)
    if end and end.group(1) != "0":
        return Status("failed", f"job exited with status {end.group(1)}")
    if end:
        return Status("built", "")
    planned = ev.text("stderr", "stdout")
    dry_run = _DRY_RUN.search(planned)
    if dry_run:
        return Status("dry-run", _dry_run_reason(dry_run.group(1), bool(_NO_ACCOUNT.search(planned))))
    return Status("building" if START.search(ev.text("job.out")) else "queued", "")
