"""The full table of a run (every column) as a CSV file, written from the
row model: every row of the run (caraml/row.py, rows_of_run) with the
columns of aux/caraml_columns.xml, into RUN/<id>/result/result_csv.dat.
JUBE 2.5.1 prints every table it writes, and this one's lines are several
hundred characters long, so `jube result` shows the short tables and the
row model writes this one: the combine step when it decides a row, and
caraml/row/row_out.py wherever a row's state changes before.

    python -m caraml.row.full_table RUN          (the last run of a JUBE outpath, or one run's folder)

writes the file anew and prints it. Standard library only (login and
compute nodes; the csv module, as pandas is not there)."""

from __future__ import annotations

import csv
import io
import os
import re
import socket
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from caraml import benchmarks, jube_run, report
from caraml.report import last_kv
from caraml.row.run import rows_of_run
from caraml.row.jube_lines import table_fields

COLUMNS = Path(__file__).resolve().parents[2] / "aux" / "caraml_columns.xml"
FILE = Path("result") / "result_csv.dat"
# the data step's line and its warning of a corpus shorter than one sequence
_DATA = re.compile(r"^CARAML data:.*\bname=(\S+)", re.MULTILINE)
_TINY = re.compile(r"^CARAML warning: corpus \S+ has only (\d+) tokens", re.MULTILINE)


def columns(benchmark: str | None) -> list[tuple[str, str, str | None]]:
    """(title, source, format) of the head set, the benchmark's own set
    (named as the benchmark; "other" where it has none) and the tail."""
    root = ET.parse(COLUMNS).getroot()
    own = benchmark if root.find(f"column[@set='{benchmark}']") is not None else "other"
    unit = benchmarks.get(benchmark).unit.capitalize() if benchmark in benchmarks.names() else "Work"
    return [(c.get("title").replace("{Unit}", unit), c.text.strip(), c.get("format"))
            for name in ("head", own, "tail") for c in root.findall(f"column[@set='{name}']")]


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _data_name(stdout: str) -> str:
    name = _DATA.findall(stdout)
    tiny = _TINY.findall(stdout)
    return (name[0] if name else "") + (f" (only {tiny[0]} tokens: repeated)" if tiny else "")


def sources(row: dict, run_dir: Path, planned: dict[int, jube_run.WorkPackage]) -> dict[str, object]:
    """Every value a column may name: row.<field> (the row's `CARAML row`
    line, its state, reason and flags), global.<key> (the driver's summary
    line), param.<name> (JUBE's parameters of the work package) and
    data.name (the data step's corpus)."""
    folder = Path(row["work_package"]).parent.name  # 000003_execute
    head = folder.split("_", 1)[0]
    wp_id = int(head) if head.isdigit() else -1
    wp = planned.get(wp_id)
    data_id = wp_id if folder.endswith("_prepare_data") else (wp.parents[0] if wp and wp.parents else None)
    data = "".join(_read(p / "stdout") for p in run_dir.glob(f"{data_id:06d}_*/work")) \
        if data_id is not None else ""
    values: dict[str, object] = {f"row.{k}": v for k, v in table_fields(row).items()}
    values.update({"row.reason": report.one_line(row["status"]["reason"]),
                   "row.flags": " ".join(row["flags"]) or "none",
                   "row.work_package": row["work_package"], "data.name": _data_name(data)})
    values.update({f"global.{k}": v for k, v in
                   last_kv(_read(run_dir / folder / "work" / "job.out"), "global").items()})
    values.update({f"param.{k}": v for k, v in (wp.params if wp else {}).items()})
    return values


def _cell(value: object, form: str | None) -> str:
    if value is None or value == "-":
        return ""
    if form:
        try:
            return format(float(value), form)
        except ValueError:
            pass
    return str(value)


def _order(row: dict) -> tuple:
    config = row["config"]
    return (row["system"]["name"] or "", config["model"] or "", config["precision"] or "",
            config["compile"] or "", config["global_batch"] or 0)


def table(run_dir: Path) -> str:
    """The run's full table: one line per row, sorted as JUBE's tables."""
    rows = sorted(rows_of_run(run_dir, slurm_state=lambda job_id: None), key=_order)
    planned = jube_run.work_packages(run_dir)
    cols = columns(next((r["benchmark"] for r in rows if r["benchmark"]), None))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([title for title, _, _ in cols])
    for row in rows:
        values = sources(row, run_dir, planned)
        writer.writerow([_cell(values.get(source), form) for _, source, form in cols])
    return out.getvalue()


def write(run_dir: Path) -> Path:
    """The file, replaced whole: jobs on several nodes may write it at once."""
    path = run_dir / FILE
    path.parent.mkdir(exist_ok=True)
    part = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.part")
    try:
        part.write_text(table(run_dir))
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    return path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    try:
        path = write(jube_run.last_run(Path(args[0])))
    except (OSError, ValueError, ET.ParseError) as error:
        report.error(f"the full table could not be written: {error}")
        return 1
    sys.stdout.write(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
