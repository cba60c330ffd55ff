"""The row model: one measured configuration (a JUBE work package of a
benchmark's execute step) decided once, from what its job and the combine
step left behind. Everything that shows a row reads what this module
decides: the JUBE tables (through the `CARAML row:` lines it prints), the
README's main command (caraml/login/rows.py) and caraml-compare (row.json).

    python -m caraml.row --benchmark image --jpwr-status 0 JPWR_OUT JPWR_ERR

run in the combine step's work directory, reads the execute work package
through JUBE's `execute` link and JUBE's own record of the run
(caraml/jube_run.py), writes row.json there and prints the lines for the
tables. No value reaches this module through Python or shell source: the
paths are arguments, the facts come from files.

The model is four modules, each imported only by the ones after it:
caraml/row/evidence.py reads a work package, caraml/row/decide.py decides
its row (with caraml/row/status.py, the status, and caraml/row/facts.py,
what the driver's and jpwr's lines say), caraml/row/jube_lines.py prints it, and
this one runs them for the combine step and for a whole run folder.

Standard library only (and the suite's JUBE adapter, peak and benchmark
tables): the login node's python3 runs it, before any environment exists."""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from caraml import benchmarks, jube_run, report
from caraml.row import history
from caraml.row.decide import SCHEMA, decide_row
from caraml.row.evidence import Evidence, data_errors, data_step, gather
from caraml.row.jube_lines import print_lines

FILE_NAME = "row.json"


def undecided(benchmark: str | None, work_package: Path, error: Exception) -> dict:
    """The row of a work package whose files the model cannot read (a
    broken JUBE record, a file it cannot parse): failed, with the cause, so
    no table waits for a decision that never comes."""
    return {"schema": SCHEMA, "benchmark": benchmark, "work_package": str(work_package),
            "system": {k: None for k in ("name", "description", "device_kind", "device_unit",
                                         "tdp_w", "nodes", "devices_per_node", "devices")},
            "config": {**{k: None for k in ("model", "precision", "global_batch",
                                            "sequence_length", "image_size", "backend", "tp",
                                            "pp", "dp", "micro_batch", "params", "compile")},
                       "label": f"work package {work_package.parent.name}"},
            "throughput": None, "mfu": None, "energy": None, "power_limit": None, "memory": None,
            "status": {"state": "failed", "reason": f"the row model could not decide this row "
                                                    f"({type(error).__name__}: {error})"},
            "flags": [], "provenance": {}}


def decide_now(work: Path) -> dict:
    """The row of an execute work package as the model decides it from what
    the work package holds now (its combine step has not run: no energy)."""
    return _decide_or_fail(None, work)


def _decide_or_fail(benchmark: str | None, work: Path, **kwargs) -> dict:
    try:
        ev = gather(work, **{k: v for k, v in kwargs.items() if k != "slurm_state"})
        extra = {"slurm_state": kwargs["slurm_state"]} if kwargs.get("slurm_state") else {}
        return decide_row(ev.params.get("row_benchmark") or benchmark, ev, **extra)
    except (OSError, ValueError, KeyError, ET.ParseError) as error:
        return undecided(benchmark, work.resolve(), error)


def read(path: Path) -> dict:
    """A row.json checked against this model's schema; ValueError says what is wrong."""
    try:
        row = json.loads(path.read_text())
    except OSError as err:
        raise ValueError(f"{path}: cannot read it ({err.strerror})") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not JSON ({err})") from None
    if not isinstance(row, dict) or row.get("schema") != SCHEMA:
        found = row.get("schema") if isinstance(row, dict) else type(row).__name__
        raise ValueError(f"{path}: schema {found!r}, not {SCHEMA!r}; run `jube result -a` "
                         "with this suite's version")
    return row


def rows_of_run(run_dir: Path, *, slurm_state=None) -> list[dict]:
    """Every row of a JUBE run directory: each one the combine step decided
    (row.json; one it cannot read is a failed row that names the file) and,
    for each execute work package whose combine step has not run, the one
    the model decides now from what that work package holds."""
    rows, decided = [], set()
    for path in sorted(run_dir.glob(f"*/work/{FILE_NAME}")):
        try:
            row = read(path)
        except ValueError as error:
            # the combine step's work folder links its execute work package
            link = path.parent / "execute"
            row = undecided(None, (link if link.is_dir() else path.parent).resolve(), error)
            row["status"]["reason"] = str(error)
        rows.append(row)
        decided.add(_folder(row["work_package"]))
    for work in sorted(run_dir.glob("*_execute/work")):
        if _folder(str(work.resolve())) not in decided:
            rows.append(_decide_or_fail(None, work, slurm_state=slurm_state))
    return rows + _not_started(run_dir)


def _folder(work_package: str) -> str:
    """A work package by its folder's name in the run (000001_execute): the
    same in a run folder copied or moved elsewhere, whose row.json still
    names the first place."""
    return Path(work_package).parent.name


def _not_started(run_dir: Path) -> list[dict]:
    """A row for each execute work package JUBE planned and never began (a
    `jube run` stopped by Ctrl-C before it): JUBE makes a work package's
    folder only when it starts it."""
    try:
        planned = jube_run.work_packages(run_dir)
    except (OSError, ET.ParseError):
        return []
    parents = {parent for wp in planned.values() for parent in wp.parents}
    rows = []
    for wp in planned.values():
        work = run_dir / wp.folder / "work"
        # JUBE plans no execute package after a data step that failed: its row is that failure
        failed_data = wp.step == "prepare_data" and wp.id not in parents
        if not failed_data and (wp.step != "execute" or work.parent.exists()):
            continue
        texts = data_errors(work) if failed_data else data_step(run_dir, wp)
        ev = Evidence(texts, wp.params, str(work))
        try:
            row = decide_row(wp.params.get("row_benchmark"), ev, slurm_state=None)
        except ValueError as error:  # a work package that names no benchmark of the table
            rows.append(undecided(None, work, error))
            continue
        if failed_data and row["status"]["state"] != "failed":
            continue  # still preparing
        if row["status"]["state"] == "queued":
            # the run may be going on, or stopped: either is said
            row["status"]["reason"] = ("not started: JUBE starts it after the ones before it; "
                                       "where the run was stopped jube continue goes on")
        rows.append(row)
    return rows


def write(row: dict, folder: Path) -> Path:
    path = folder / FILE_NAME
    path.write_text(json.dumps(row, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m caraml.row", description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", required=True, choices=benchmarks.names())
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
    row = _decide_or_fail(args.benchmark, args.execute, jpwr_out=args.jpwr_out,
                          jpwr_err=args.jpwr_err, jpwr_status=args.jpwr_status)
    if row["status"]["reason"].startswith("the row model could not decide"):
        report.error(row["status"]["reason"])
    write(row, Path.cwd())
    history.record(row, Path.cwd())
    print_lines(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
