"""Room in a local job's work folder once the job has ended. A local job
runs inside JUBE's submit step; when the step returns, the row model writes
row.out and JUBE writes the step's environment file there. On a full disk
(or a quota of files) those writes fail, JUBE marks the work package as an
error for good, and neither `jube continue` nor the combine step ever come
to the finished job's figures and energy files. So the step waits, with a
deadline, for room to come back, and says so where its user can see it: the
step's own output files are in the full folder, so the line goes to the
terminal `jube run` was started from as well.

Standard library only (the login side)."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

WAIT_ENV = "CARAML_FULL_DISK_WAIT_S"
DEFAULT_WAIT_S = 1800.0
# more than what follows the job writes there (row.out, row.json, JUBE's environment file)
PROBE_BYTES = 256 * 1024


def wait_s() -> float:
    """The deadline's seconds (CARAML_FULL_DISK_WAIT_S, else 30 minutes)."""
    given = os.environ.get(WAIT_ENV, "").strip()
    if not given:
        return DEFAULT_WAIT_S
    try:
        seconds = float(given)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise ValueError(f"{WAIT_ENV}={given!r} is not a number of seconds: set it to 0 or more, or unset it")
    return seconds


def lacking(folder: Path) -> str | None:
    """Why `folder` cannot take a new file of PROBE_BYTES now; None where it can."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".caraml-room-") as probe:
            probe.write(bytes(PROBE_BYTES))
            probe.flush()
            os.fsync(probe.fileno())  # a file system that allocates late refuses here
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def say(line: str) -> None:
    """The line on stderr (in the full folder it may be lost) and on the
    terminal, where there is one."""
    for write in (_stderr, _terminal):
        try:
            write(line + "\n")
        except OSError:
            pass


def _stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def _terminal(text: str) -> None:
    if not sys.stderr.isatty():  # a terminal's stderr has had the line already
        with open("/dev/tty", "w") as tty:
            tty.write(text)


def wait_for_room(folder: Path, seconds: float, pace_s: float = 2.0) -> bool:
    """True once `folder` takes new files (at once where it does); False
    where it still does not after `seconds`, said in a line."""
    why = lacking(folder)
    if why is None:
        return True
    minutes = f"{seconds / 60:.3g} min"
    say(f"CARAML: the job has ended, but its folder {folder} takes no new file ({why}): free space "
        f"there within {minutes} and this run goes on to its row and energy; its figures are in job.out "
        f"({WAIT_ENV} sets how long this waits)")
    deadline, gave_up = time.monotonic() + seconds, f"in {minutes}"
    try:
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(pace_s, left))
            if lacking(folder) is None:
                say(f"CARAML: {folder} takes new files again: going on")
                return True
    except KeyboardInterrupt:
        gave_up = "before the Ctrl-C"
    say(f"CARAML ERROR: {folder} took no new file {gave_up}: JUBE cannot finish this work package; "
        "its figures stay in job.out, and the run's tables decide its row from there")
    return False
