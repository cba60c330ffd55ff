"""Every process a job starts dies with it, also when its job script is
killed outright (SIGKILL runs no trap): torchrun and its workers would
otherwise train on beside the next work package, and the killed one's row
would stay "running" for ever.

job.sh starts this in a session of its own when it runs without Slurm
(Slurm ends a job's processes itself). It remembers the job script's
descendants while the script lives; once the script is gone it kills the
ones still alive, and if the script left no end markers it writes them:
the error file names the signal, the row's lines say it failed (the row
model's command, as the job script's own exit handler runs it:
caraml/row/row_out.py), the done marker lets JUBE go on.

Standard library only, Linux /proc: it runs with the node's python3."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

Process = tuple[int, str]  # pid and start time: a pid alone may be reused
# The job's power guard outlives its job script: it puts the GPUs' power
# limits back once the ranks that set them are gone, and then ends by itself
# (caraml/job/power_guard.py, --watch-pid)
GUARD = b"caraml.job.power_guard"
# the suite's checkout, whose row model the watcher runs
CHECKOUT = str(Path(__file__).resolve().parents[2])


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of a live process, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name in parentheses may hold spaces: split after it
    fields = text[text.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return int(fields[1]), fields[19]


def descendants(root: int) -> set[Process]:
    children: dict[int, list[int]] = {}
    started: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))):
            children.setdefault(stat[0], []).append(int(entry))
            started[int(entry)] = stat[1]
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add((child, started[child]))
            todo.append(child)
    return found


def alive(process: Process) -> bool:
    stat = _stat(process[0])
    return stat is not None and stat[1] == process[1]


def _guard(pid: int) -> bool:
    try:
        return GUARD in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def kill_all(processes: set[Process]) -> int:
    """SIGKILL to each remembered process still alive and what it started
    since, the power guard left out."""
    targets = {p for p in processes if alive(p)}
    for process in list(targets):
        targets |= descendants(process[0])
    targets = {p for p in targets if not _guard(p[0])}
    for pid, _ in targets:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(targets)


def ending(signal_file: Path | None, killed: int) -> str:
    """The error file's line for a job script that ended without its markers:
    the signal that reached it first where it wrote one down (a Ctrl-C, a
    TERM, and then it was killed), SIGKILL, which it cannot write, otherwise."""
    try:
        received = signal_file.read_text().split() if signal_file else []
    except OSError:
        received = []
    stopped = f"{killed} of its processes were stopped"
    if received:
        return f"stopped by {received[0]}: the job script was killed before it ended; {stopped}\n"
    return (f"job exited with status {128 + signal.SIGKILL} (SIGKILL): "
            f"the job script was killed; {stopped}\n")


def watch(job: Process, done_file: Path, error_file: Path,
          interval_s: float = 0.2, signal_file: Path | None = None) -> None:
    seen: set[Process] = set()
    while alive(job):
        # this watcher is the job script's child too
        seen = {p for p in seen if alive(p)} | {p for p in descendants(job[0]) if p[0] != os.getpid()}
        time.sleep(interval_s)
    killed = kill_all(seen)
    if not done_file.exists():
        error_file.write_text(ending(signal_file, killed))
        try:
            # the row model's command, not an import of it: the job script's
            # helpers sit below the row model (docs/architecture.md)
            path = os.pathsep.join(filter(None, (CHECKOUT, os.environ.get("PYTHONPATH"))))
            subprocess.run([sys.executable, "-m", "caraml.row.row_out", str(done_file.parent)],
                           env={**os.environ, "PYTHONPATH": path}, stdin=subprocess.DEVNULL, check=False)
        finally:  # JUBE waits for the done marker, whatever happened before it
            mark_done(done_file)


def mark_done(done_file: Path) -> None:
    """The done marker: the one the job script made at its start under another
    name (aux/job.sh.in), renamed, which needs no new space on a full disk."""
    try:
        os.replace(done_file.with_name(done_file.name + ".pending"), done_file)
    except FileNotFoundError:
        done_file.touch()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pid", type=int, required=True, help="the job script's process")
    ap.add_argument("--done-file", type=Path, required=True)
    ap.add_argument("--error-file", type=Path, required=True)
    ap.add_argument("--signal-file", type=Path, help="where the job script writes the signals it got")
    args = ap.parse_args(argv)
    stat = _stat(args.pid)
    if stat is None:
        return 0
    watch((args.pid, stat[1]), args.done_file.absolute(), args.error_file.absolute(),
          signal_file=args.signal_file and args.signal_file.absolute())
    return 0


if __name__ == "__main__":
    sys.exit(main())
