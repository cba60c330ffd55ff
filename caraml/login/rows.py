"""Whether every row of a result table succeeded: the exit status of the
README's main command. Prints one line per row that did not, and exits 1.

    python -m caraml.login.rows RUN_DIR/result/result_csv.dat"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

# "ok (stopped early: ...)" is a measurement too; the row says how it ended
SUCCEEDED = ("ok", "dry run")


def unfinished(table: Path) -> list[str]:
    """A line for each row whose status is neither ok nor a dry run."""
    with table.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return [f"row {i + 1}: {row.get('Status') or 'no status'}"
            + (f": {row['Error']}" if row.get("Error") else "")
            for i, row in enumerate(rows)
            if not (row.get("Status") or "").startswith(SUCCEEDED)]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.splitlines()[-1].strip(), file=sys.stderr)
        return 2
    table = Path(args[0])
    if not table.is_file():
        print(f"CARAML: no result table {table}: the run gave no rows", file=sys.stderr)
        return 1
    bad = unfinished(table)
    for line in bad:
        print(f"CARAML: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
