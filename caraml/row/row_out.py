"""A row's lines before its combine step has run: the row model decides the
row from what its work package holds now and writes the `CARAML row` lines
into the work package's row.out, which JUBE's patterns read (platform.xml,
rowPatterns); once the combine step has run, its own lines win. Written
wherever a row's state changes: when the job is written and submitted
(caraml/login/jobplan.py), when a check refuses it (platform.xml,
preflight_cmd), when the job starts and ends (aux/job.sh.in) and when its
script was killed (caraml/job/watch.py); each time the run's full table
(caraml/row/full_table.py) is written anew too. A container build job's lines say
how its build stands (caraml/row/status.py, decide_build).

    python3 -m caraml.row.row_out [--exit-status N] [WORK]

WORK is the work folder (default: here); the command exits with N, so a
step's shell passes its own status on. Standard library only (login and
compute nodes)."""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from caraml import jube_run
from caraml.row import full_table
from caraml.row.decide import decide_row
from caraml.row.evidence import Evidence, gather
from caraml.row.jube_lines import print_build, print_lines
from caraml.row.run import undecided
from caraml.row.status import decide_build

LINES_FILE = "row.out"
# JUBE keeps the first analysis of a run (in the run folder): a new line makes it stale
ANALYSIS_CACHE = "analyse.xml"
# JUBE rewrites its record of the run (workpackages.xml) in place, while a
# job on another node may read it: a second look a second later finds it whole
_TRIES = 3


def _gather(work: Path) -> Evidence:
    for _ in range(_TRIES - 1):
        try:
            return gather(work)
        except ET.ParseError:
            time.sleep(1)
    return gather(work)


def lines(work: Path) -> str:
    """The row's lines as the row model decides them now (Slurm is not
    asked: a job just written or started is queued or running)."""
    out = io.StringIO()
    try:
        ev = _gather(work)
        if ev.params.get("building_container") == "yes":
            status = decide_build(ev)
            print_build(status.state, status.reason, out)
        else:
            print_lines(decide_row(ev.params.get("row_benchmark"), ev, slurm_state=None), out)
    except (OSError, ValueError, KeyError, ET.ParseError) as error:
        print_lines(undecided(None, work.resolve(), error), out)
    return out.getvalue()


def write(work: Path) -> Path:
    """row.out, and the run's full table anew (caraml/row/full_table.py)."""
    path = work / LINES_FILE
    part = work / (LINES_FILE + ".part")
    part.write_text(lines(work))
    os.replace(part, path)
    run_dir = work.resolve().parents[1]
    (run_dir / ANALYSIS_CACHE).unlink(missing_ok=True)
    if not jube_run.is_run(run_dir):
        return path  # a job script made outside a JUBE run: no run, no table
    try:
        full_table.write(run_dir)
    except ET.ParseError as error:  # JUBE's record being rewritten: the next change writes it
        print(f"CARAML: the full table of {run_dir} was not written ({error})", file=sys.stderr)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m caraml.row.row_out",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--exit-status", type=int, default=0,
                        help="the status to exit with (the step's own)")
    parser.add_argument("work", type=Path, nargs="?", default=Path("."))
    args = parser.parse_args(argv)
    try:
        write(args.work)
    except (OSError, ValueError) as error:
        # not an error line: the row's own decision must not read it as the job's failure
        print(f"CARAML: the row's lines could not be written into {args.work} ({error}); "
              "jube result shows the row once its combine step has run", file=sys.stderr)
    return int(args.exit_status)


if __name__ == "__main__":
    sys.exit(main())
