"""The combine step's command: the row of one execute work package decided
once, from what its job and jpwr combine left.

    python -m caraml.row --benchmark image --jpwr-status 0 JPWR_OUT JPWR_ERR

run in the combine step's work directory, reads the execute work package
through JUBE's `execute` link and JUBE's own record of the run
(caraml/jube_run.py), writes row.json there, adds the row to the results
history, prints the lines for the tables and keeps them beside the
other repeats of its configuration (caraml/row/repeat_group.py). No value
reaches this module through Python or shell source: the paths are
arguments, the facts come from files. Standard library only (and the suite's JUBE adapter, peak and
benchmark tables): the login node's python3 runs it."""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from caraml import report
from caraml.row import history, repeat_group
from caraml.row.jube_lines import print_lines
from caraml.row.run import decide_or_fail

UNDECIDED = "the row model could not decide"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m caraml.row", description=__doc__.split("\n\n")[0])
    # checked as the row is decided: an unknown name, or a site's registry that
    # fails, is then the failed row's cause rather than a traceback here
    parser.add_argument("--benchmark", required=True, help="its name in caraml/benchmarks.py")
    parser.add_argument("--execute", type=Path, default=Path("execute"),
                        help="the execute step's work folder (default: JUBE's link to it)")
    parser.add_argument("--jpwr-status", type=int, default=0,
                        help="the exit status of jpwr combine")
    parser.add_argument("jpwr_out", type=Path, help="what jpwr combine printed")
    parser.add_argument("jpwr_err", type=Path, help="jpwr combine's errors")
    args = parser.parse_args(argv)
    if not (args.execute / "job.sh").exists() and not (args.execute / "stderr").exists():
        report.error(f"{args.execute} is no execute work package: run this in the combine step")
        return 2
    row = decide_or_fail(args.benchmark, args.execute, jpwr_out=args.jpwr_out,
                         jpwr_err=args.jpwr_err, jpwr_status=args.jpwr_status)
    if row.reason.startswith(UNDECIDED):
        report.error(row.reason)
    row = history.keep(row, Path.cwd())
    lines = io.StringIO()
    print_lines(row, lines)
    report.write_line(lines.getvalue().rstrip("\n"), sys.stdout)
    # beside the other repeats of its configuration, for JUBE's statistics over them
    repeat_group.keep_or_say(Path.cwd(), args.execute, lines.getvalue())
    return 0
