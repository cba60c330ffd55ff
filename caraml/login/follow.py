"""Runs `jube run` for the README's main command and follows the run to its
end, saying what happens while it waits:

- one line per work package as its job starts and as it ends (system,
  configuration, status, throughput), and the running job's latest progress
  line at a steady pace;
- for Slurm jobs, `jube continue` until no job of the run is left in the
  queue, with each job's Slurm state and reason whenever it changes and at
  that same pace while it does not;
- a job that Slurm says cannot start as things stand (its nodes down or
  drained, a partition down, a limit the job itself exceeds, a dependency
  that can never be met) ends the wait: the job stays queued, so nothing
  is lost and Slurm starts it once the cause is gone; the line says how to
  follow it then or how to cancel it, and the work package's `slurm_state`
  file (`state=PENDING reason=<reason, spaces as _>`) keeps what Slurm
  said when the wait ended (the row model asks Slurm itself for a row's
  `pending` reason, caraml/row/status.py).

    python -m caraml.login.follow [-q|-v] [--pace S] [--run-file FILE] HANDLE -- jube run SCRIPT ...

Its lines have levels (the standard `logging` module's, logger
"caraml.follow"): a job that cannot start, a `jube run` that failed or made
no run, a queue that does not answer at WARNING; JUBE's own output and each
job's start, end, progress and Slurm state at INFO (the default); each
`jube continue` and `jube status` and what the queue said at DEBUG. -q
shows the warnings alone, -v the details too; CARAML_LOG_LEVEL sets the
level without them (aux/run_benchmarks.sh passes its -q and -v on so).

It follows only the run its own `jube run` made (the id JUBE prints as it
starts), whatever other runs go on in the same folder.

Exit status 0 when the run ended, 1 when a job cannot start (the run has
rows to show), 2 when `jube run` failed or made no run (it has none).
Standard library only; a job's end is said as the row model decides it."""

from __future__ import annotations

import argparse
import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from caraml import jube_run
from caraml.login.host_locks import JUBE_RUN_ID, held, jube_folder_lock, jube_script
from caraml.row.run import READ_ERRORS, decide_now, decide_work_package
from jpwr.notice import add_level_options, chosen_level, level_kept

LOG = logging.getLogger("caraml.follow")
LOG.setLevel(logging.INFO)  # main() sets the level asked for
LEVEL_ENV = ("CARAML_LOG_LEVEL",)

SUBMITTED = re.compile(r"^Submitted batch job (\d+)", re.MULTILINE)
PROGRESS = re.compile(r"^\s*iteration\s+\d+.*$", re.MULTILINE)
STATE_FILE = "slurm_state"
NO_RUN = 2  # the exit status where there is no run to show
# platform.xml's done_file, error_file and out_file
DONE, JOB_OUT = "ready", "job.out"

# Pending reasons that waiting does not cure: the job stays pending until
# someone changes the nodes, the partition, the limits or the job.
NEVER_BY_WAITING = ("ReqNodeNotAvail", "Nodes required for job are DOWN", "PartitionDown",
                    "PartitionInactive", "PartitionNodeLimit", "PartitionTimeLimit",
                    "DependencyNeverSatisfied", "InvalidAccount", "InvalidQOS", "JobHeldAdmin",
                    "JobHeldUser", "BadConstraints", "AccountNotAllowed", "QOSNotAllowed",
                    # Slurm 22.05's words for an account a partition's AllowAccounts
                    # leaves out, and its first for a job over a partition's limit
                    "Job's account not known", "PartitionConfig")
# Limits on how many jobs may run at once clear as this run's own jobs end;
# with none of them running, they do not.
WHILE_OTHERS_RUN = ("AssocMaxJobsLimit", "AssocGrpJobsLimit", "QOSMaxJobsPerUserLimit")


def cannot_start(reason: str, others_running: bool) -> bool:
    if reason.startswith(NEVER_BY_WAITING) or reason.endswith("PerJobLimit") \
            or "MinutesLimit" in reason:  # a used-up budget
        return True
    return reason.startswith(WHILE_OTHERS_RUN) and not others_running


@dataclass
class Package:
    """One work package of the run that has a job script."""
    work: Path
    config: str = ""  # the parameters that tell it from its siblings
    job_id: str = ""
    said: str = ""  # the last state line printed for it
    said_at: float = 0.0
    progress: str = ""  # the last progress line printed for it
    progress_at: float = 0.0
    started: bool = False
    ended: bool = False

    @property
    def name(self) -> str:
        return self.work.parent.name

    @property
    def label(self) -> str:
        return f"{self.name} [{self.config}]" if self.config else self.name

    def text(self, file: str, head: int = -1, tail: int = 0) -> str:
        """The file's text ("" while there is none): its first `head` bytes,
        or its last `tail` bytes; a long job's output is looked at every
        second, never read whole."""
        try:
            with (self.work / file).open("rb") as f:
                if tail:
                    f.seek(max(0, f.seek(0, 2) - tail))
                return f.read(head).decode(errors="replace")
        except OSError:
            return ""


def varying_parameters(run_dir: Path) -> dict[str, str]:
    """Work package directory name -> its system and the swept parameters
    it differs in from its siblings, e.g. `CPU global_batch_size=16`. A
    swept parameter is one whose definition is a list (it holds its own
    separator); what is computed from it is left out."""
    try:
        planned = jube_run.work_packages(run_dir)
    except (OSError, ET.ParseError):  # JUBE writes it as the run goes
        return {}
    found = {wp.folder: wp.params for wp in planned.values() if wp.step}
    swept = {name for wp in planned.values() for name in wp.swept}
    # a command line that happens to hold a comma is no list: values with
    # spaces or of more than a word's length are left out
    # compared among the jobs alone: the other steps' packages lack some parameters
    jobs = [v for name, v in found.items() if name.endswith("_execute")]
    differ = sorted(n for n in swept if len({v.get(n) for v in jobs}) > 1
                    and all(len(v.get(n) or "") <= 40 and " " not in (v.get(n) or "") for v in jobs))
    return {wp: " ".join(filter(None, [values.get("system_name", "")]
                             + [f"{n}={values[n]}" for n in differ if n in values]))
            for wp, values in found.items()}


def ended(work: Path, settled: bool = True) -> str | None:
    """How a job ended, as the row model decides it (before its energy is
    combined): the state, its reason, and the throughput. While JUBE runs
    (not `settled`), a record it is rewriting is None: asked again at the
    next look, not said as a failed row."""
    if settled:
        row = decide_now(work)
    else:
        try:
            row = decide_work_package(None, work)
        except READ_ERRORS:
            return None
    return (f"{row.state}{f' ({row.reason})' if row.reason else ''}, "
            + (f"{row.per_s:.4g} {row.unit or 'work'}/s" if row.per_s is not None else "no throughput"))


class Follower:
    def __init__(self, handle: Path, pace_s: float, out: TextIO = sys.stdout,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.handle = handle
        self.pace_s = pace_s
        self.out = out
        self.clock = clock
        # the run's id, as its own `jube run` says it: another command's run
        # in the same folder is never taken for this one's
        self.run_id: int | None = None
        self.run_dir: Path | None = None
        self.packages: dict[str, Package] = {}

    def say(self, line: str, level: int = logging.INFO) -> None:
        """A `CARAML:` line, where the level asked for shows it."""
        if LOG.isEnabledFor(level):
            print(f"CARAML: {line}", file=self.out, flush=True)

    def heard(self, line: str) -> None:
        """A line of `jube run`'s own output."""
        found = JUBE_RUN_ID.match(line)
        if found and self.run_id is None:
            self.run_id = int(found.group(1))

    def look(self, settled: bool = True) -> None:
        """One look at the run: new, started, progressing and ended jobs
        (`settled`: no JUBE command of the run is running)."""
        if self.run_dir is None:
            if self.run_id is None:
                return
            self.run_dir = self.handle / f"{self.run_id:06d}"
        configs = None  # read once a look, and only while a package lacks its own
        for script in sorted(self.run_dir.glob("*/work/job.sh")):
            name = script.parent.parent.name
            wp = self.packages.setdefault(name, Package(script.parent))
            if not wp.config:
                configs = configs if configs is not None else varying_parameters(self.run_dir)
                wp.config = configs.get(name, "")
            self._look_at(wp, settled)

    def _look_at(self, wp: Package, settled: bool) -> None:
        if not wp.job_id and (found := SUBMITTED.search(wp.text("stdout"))):
            wp.job_id = found.group(1)
            self.say(f"{wp.label} submitted as Slurm job {wp.job_id}")
        job_out = wp.text(JOB_OUT, tail=1 << 16)  # the progress and global lines are near its end
        if not wp.started and "CARAML job: start=" in wp.text(JOB_OUT, head=4096):
            wp.started = True
            self.say(f"{wp.label} started: follow it with tail -f {shlex.quote(str(wp.work / JOB_OUT))}")
        if not wp.ended and (wp.work / DONE).exists() and (how := ended(wp.work, settled)) is not None:
            wp.ended = True
            self.say(f"{wp.label} {how}")
        elif wp.started and not wp.ended:
            lines = PROGRESS.findall(job_out)
            if lines:
                self._progress(wp, f"{wp.name} {lines[-1].strip()}")

    def _progress(self, wp: Package, line: str) -> None:
        """A job's first progress line at once, then its latest at the pace:
        a long run says it is alive without flooding the screen."""
        now = self.clock()
        if line != wp.progress and (not wp.progress or now - wp.progress_at >= self.pace_s):
            self.say(line)
            wp.progress, wp.progress_at = line, now

    def _pace(self, wp: Package, line: str) -> None:
        """Prints a changed state at once, an unchanged one at the pace."""
        now = self.clock()
        if line != wp.said or now - wp.said_at >= self.pace_s:
            self.say(line)
            wp.said, wp.said_at = line, now

    def queue(self) -> dict[str, tuple[str, str]]:
        """Slurm job id -> (state, reason) of this run's jobs in the queue."""
        ids = [wp.job_id for wp in self.packages.values() if wp.job_id]
        if not ids:
            return {}
        try:
            proc = subprocess.run(["squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%r"],
                                  capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as err:
            self.say(f"squeue did not answer ({err}); asking again in {self.pace_s:g} s", logging.WARNING)
            return {wp.job_id: ("UNKNOWN", "squeue did not answer")
                    for wp in self.packages.values() if wp.job_id and not wp.ended}
        if proc.returncode != 0:
            if "Invalid job id" in proc.stderr:  # every one of them has left the queue
                return {}
            said = " ".join(proc.stderr.split())[:200] or f"exit status {proc.returncode}"
            self.say(f"squeue failed ({said}); asking again in {self.pace_s:g} s", logging.WARNING)
            return {wp.job_id: ("UNKNOWN", "squeue failed")
                    for wp in self.packages.values() if wp.job_id and not wp.ended}
        self.say(f"squeue -j {','.join(ids)}: {' '.join(proc.stdout.split()) or 'none of them queued'}",
                 logging.DEBUG)
        found = {}
        for line in proc.stdout.splitlines():
            job, _, rest = line.partition("|")
            state, _, reason = rest.partition("|")
            found[job.strip()] = (state.strip(), reason.strip())
        return found

    def blocked(self, queued: dict[str, tuple[str, str]]) -> list[Package]:
        """Reports the queue; returns the work packages whose job cannot start."""
        running = any(state == "RUNNING" for state, _ in queued.values())
        stuck = []
        for wp in self.packages.values():
            if wp.job_id not in queued:
                continue
            state, reason = queued[wp.job_id]
            if state == "PENDING" and reason and reason != "None" and cannot_start(reason, running):
                stuck.append(wp)
            elif state != "RUNNING" or not wp.started:
                why = f" ({reason})" if reason and reason != "None" else ""
                self._pace(wp, f"{wp.name} Slurm job {wp.job_id}: {state}{why}")
        return stuck


def jube(follower: Follower, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(["jube", *args], capture_output=True, text=True)
    said = " ".join(done.stdout.split())[-200:]
    follower.say(f"jube {' '.join(args)}: status {done.returncode}{f', {said}' if said else ''}",
                 logging.DEBUG)
    return done


def _pass_on(stream: Iterable[str], follower: Follower) -> None:
    """Shows `jube run`'s output as it comes (at INFO) and lets the follower hear it."""
    for line in stream:
        if LOG.isEnabledFor(logging.INFO):
            sys.stdout.write(line)
            sys.stdout.flush()
        follower.heard(line)


def follow(handle: Path, command: list[str], pace_s: float, poll_s: float,
           run_file: Path | None = None) -> int:
    """Runs `command` (jube run) and follows its run to the end; writes the
    run's id into run_file once it is known."""
    follower = Follower(handle, pace_s)
    # another command may run a script of the same folder: JUBE parses in
    # turn (caraml/login/host_locks.py), until its banner names the run
    with held(jube_folder_lock(jube_script(command))) as release:
        # unbuffered: JUBE's banner with the run's id comes before the steps run
        run = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, errors="replace",
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
        reader = threading.Thread(target=_pass_on, args=(run.stdout, follower), daemon=True)
        reader.start()
        while run.poll() is None:
            if follower.run_id is not None:
                release()
            follower.look(settled=False)
            time.sleep(min(poll_s, 1.0))
    reader.join(timeout=30)  # the rest of its output; a child that keeps the pipe is not waited for
    follower.look()
    if run.returncode != 0:
        follower.say(f"{' '.join(command[:3])} failed with status {run.returncode}", logging.WARNING)
        return NO_RUN
    if follower.run_dir is None or not follower.run_dir.is_dir():
        follower.say(f"{' '.join(command[:3])} made no run under {handle}", logging.WARNING)
        return NO_RUN
    run_id = str(follower.run_id)
    if run_file is not None:
        run_file.write_text(run_id + "\n")
    while True:
        # a job that ended is only seen by JUBE after `jube continue`
        jube(follower, "continue", str(handle), "-i", run_id, "--hide-animation")
        follower.look()
        if jube(follower, "status", str(handle), "-i", run_id).stdout.strip() != "RUNNING":
            return 0
        queued = follower.queue()
        if not queued:
            # left the queue without its end marker: it will not write one
            # later; one more continue takes what it left
            jube(follower, "continue", str(handle), "-i", run_id, "--hide-animation")
            follower.look()
            return 0
        stuck = follower.blocked(queued)
        if stuck:
            for wp in stuck:
                state, reason = queued[wp.job_id]
                (wp.work / STATE_FILE).write_text(f"state={state} reason={reason.replace(' ', '_')}\n")
                follower.say(
                    f"{wp.label} Slurm job {wp.job_id} cannot start as things stand: "
                    f"{state} ({reason}). It stays queued; once it can start, follow it with "
                    f"jube continue {shlex.quote(str(handle))} -i {run_id} and "
                    f"jube result {shlex.quote(str(handle))} -i {run_id} -a, "
                    f"or cancel it with scancel {wp.job_id}", logging.WARNING)
            return 1
        time.sleep(poll_s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pace", type=float, default=60.0, metavar="S",
                    help="seconds between repeated progress and queue lines (default 60)")
    ap.add_argument("--poll", type=float, default=30.0, metavar="S",
                    help="seconds between looks at the Slurm queue (default 30)")
    ap.add_argument("--run-file", type=Path, metavar="FILE",
                    help="write the id of the run this command made into FILE")
    ap.add_argument("handle", type=Path, help="the benchmark's JUBE output directory")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- jube run SCRIPT ...")
    add_level_options(ap, LEVEL_ENV)
    args = ap.parse_args(argv)
    try:
        level = chosen_level(args.quiet, args.verbose, variables=LEVEL_ENV)
    except ValueError as err:
        ap.error(str(err))
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if "run" not in command[:-1]:
        ap.error("give the command after --: jube run SCRIPT ...")
    try:
        with level_kept(LOG):
            LOG.setLevel(level)
            return follow(args.handle.absolute(), command, args.pace, args.poll, args.run_file)
    except KeyboardInterrupt:
        print(f"CARAML: interrupted; what ran is in {args.handle}: jube continue and jube result "
              "take it from there", file=sys.stderr, flush=True)
        # die of the signal, so that the calling shell stops too
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        return 130


if __name__ == "__main__":
    sys.exit(main())
