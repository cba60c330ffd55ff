"""Whether the kernel's OOM killer ended a process, from what says so: the
job's cgroup (its memory.events counts `oom_kill`), the kernel's log
(dmesg names each process it killed), or Slurm (its step daemon reports the
cgroup's oom_kill events in the job's error log). A SIGKILL alone says
nothing: `kill -9`, Slurm's end of a job past its KillWait, a watchdog send
the same signal.

    python3 caraml/job/oom_evidence.py

prints the job cgroup's oom_kill count now (nothing where no cgroup's can
be read): the job script's baseline, which caraml/job/failure.py compares with
the count at the job's end. Standard library only: the node's python3 runs
it."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
# Slurm's step daemon, where its cgroup plugin saw the OOM killer at work
SLURM_OOM = re.compile(r"Detected \d+ oom[-_]kill events? in StepId=\S+")
# the kernel's lines for a process it killed for want of memory (the whole
# system's, or a memory cgroup's), and the oom-kill summary line
_KERNEL_KILLED = (r"(?:Out of memory|Memory cgroup out of memory): Killed process {pid}\b"
                  r"|oom-kill:.*\bpid={pid}\b")


def _job_cgroup(own: str) -> str:
    """The cgroup the job's processes share: under Slurm the job's own
    (.../job_<id>, above the batch step's and the training step's), else
    this process's."""
    parts = own.strip("/").split("/")
    jobs = [i for i, part in enumerate(parts) if part.startswith("job_")]
    return "/" + "/".join(parts[:jobs[-1] + 1]) if jobs else own


def cgroup_oom_kills() -> int | None:
    """The OOM kills the job's cgroup has counted (it and its children:
    cgroup v2's memory.events; v1's memory.oom_control); None where neither
    can be read."""
    root = CGROUP_ROOT
    try:
        lines = PROC_CGROUP.read_text().splitlines()
    except OSError:
        return None
    files = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        job = _job_cgroup(path).lstrip("/")
        if controllers == "":  # v2, at the root or (a hybrid host) under unified/
            files += [root / job / "memory.events", root / "unified" / job / "memory.events"]
        elif "memory" in controllers.split(","):
            files.append(root / "memory" / job / "memory.oom_control")
    for file in files:
        try:
            found = re.search(r"^oom_kill (\d+)$", file.read_text(), re.MULTILINE)
        except OSError:
            continue
        if found:
            return int(found.group(1))
    return None


def kernel_log() -> str | None:
    """The kernel's log as dmesg shows it; None where this user may not read it."""
    try:
        done = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


@dataclass
class Verdict:
    oom: bool  # the OOM killer did it, by what one source says
    said_by: str  # which source says so, or which found nothing; "" where none could be read


def judge(log_text: str, pids: list[str], oom_kills_at_start: int | None, oom_kills_now: int | None,
          kernel: str | None) -> Verdict:
    """Whether the OOM killer ended the job's killed processes (`pids`):
    where Slurm, the job's cgroup or the kernel's log says so."""
    if SLURM_OOM.search(log_text):
        return Verdict(True, "Slurm counted an oom_kill event in the job's step")
    if oom_kills_now is not None and oom_kills_now > (oom_kills_at_start or 0):
        return Verdict(True, f"the job's cgroup counted {oom_kills_now - (oom_kills_at_start or 0)} "
                             "oom_kill(s) in memory.events")
    if kernel is not None and any(re.search(_KERNEL_KILLED.format(pid=re.escape(pid)), kernel)
                                  for pid in pids):
        return Verdict(True, "the kernel's log names the process")
    looked = [what for what, seen in (("the job's cgroup counts no oom_kill", oom_kills_now is not None),
                                      ("the kernel's log names no killed rank", kernel is not None)) if seen]
    return Verdict(False, " and ".join(looked))


if __name__ == "__main__":
    count = cgroup_oom_kills()
    if count is not None:
        print(count)
    sys.exit(0)
