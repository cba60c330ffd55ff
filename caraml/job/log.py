"""The job script's own lines in a job's output (aux/job.sh.in): its start
line, once per attempt of a job Slurm requeued (a node that failed), with
the requeues before it. Slurm appends a requeued job's output to what the
attempt it stopped wrote, so a job's failure cause (caraml/job/failure.py) and
its row (caraml/row/evidence.py) are read from the last attempt on.
Standard library only (job script and login node)."""

from __future__ import annotations

import re

START = re.compile(r"^CARAML job: start=(\S+).*$", re.MULTILINE)
_REQUEUED = re.compile(r"^CARAML job: start=.* requeued=(\d+)\s*$", re.MULTILINE)


def last_attempt(text: str) -> str:
    """A job's output from its last attempt's start line on, where it has
    several (one attempt's output is kept whole)."""
    starts = list(START.finditer(text))
    return text[starts[-1].start():] if len(starts) > 1 else text


def requeued(job_out: str) -> int | None:
    """How often Slurm requeued the job before its last attempt (None where
    the job has not started, or its script said nothing of it)."""
    found = _REQUEUED.findall(job_out)
    return int(found[-1]) if found else None
