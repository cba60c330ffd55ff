"""Whether every row of a JUBE run succeeded and is kept: the exit status
of the README's main command. The row model (caraml/row/) decides each
row, the same decision the tables show; this prints one line per row whose
job failed or never ended (a row too short to be a measurement ran as
planned: the tables say so), one line per results history that could not
be written (however many rows it lost) and exits 1 when there is one.

    python -m caraml.login.rows RUN_DIR"""

from __future__ import annotations

import sys
from pathlib import Path

from caraml import jube_run
from caraml.row.run import rows_of_run
from caraml.row.status import RAN

# A dry run measures nothing and is what was asked for.
SUCCEEDED = (*RAN, "dry-run")


def unfinished(run_dir: Path) -> list[str]:
    """A line for each row that is neither a measurement nor a dry run, and
    one for each history error, naming the rows it kept out of the history."""
    rows = rows_of_run(run_dir)
    lines = [f"row {i + 1} ({row.label} on {row.system_name}): {row.state}"
             + (f": {row.reason}" if row.reason else "")
             for i, row in enumerate(rows) if row.state not in SUCCEEDED]
    lost: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        if row.history_error:
            lost.setdefault(row.history_error, []).append(i + 1)
    return lines + [f"the results history was not written, row{'s' if len(numbers) > 1 else ''} "
                    f"{', '.join(map(str, numbers))} of {run_dir} not in it: {why}; the rows are in "
                    f"their row.json"
                    for why, numbers in lost.items()]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.splitlines()[-1].strip(), file=sys.stderr)
        return 2
    run_dir = Path(args[0])
    if not jube_run.is_run(run_dir):
        print(f"CARAML: {run_dir} is no JUBE run directory (no {jube_run.RECORD}): "
              "the run gave no rows", file=sys.stderr)
        return 1
    bad = unfinished(run_dir)
    if not list(run_dir.glob("*_execute/work")):
        bad.append("no work package of the execute step: the run gave no rows")
    for line in bad:
        print(f"CARAML: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
