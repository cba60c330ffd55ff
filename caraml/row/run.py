"""The rows of a JUBE run folder: each one the combine step decided
(row.json, caraml/row/combine.py) and, for each work package whose combine
step has not run, the one the row model decides now from what it holds (a
job queued, running or refused, a work package JUBE never began). The
README's main command (caraml/login/rows.py), the full table, the
follower and caraml-compare read a run's rows here. Standard library only
(login node)."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from pathlib import Path

from caraml import benchmarks, jube_run
from caraml.row import row_json, verdict
from caraml.row.decide import decide_row
from caraml.row.evidence import Evidence, data_errors, data_step, gather
from caraml.row.record import Row
from caraml.row.status import SlurmState


def undecided(benchmark: str | None, work_package: Path, error: Exception, reason: str = "") -> Row:
    """The row of a work package whose files the model cannot read (a
    broken JUBE record, a file it cannot parse): failed, with the cause, so
    no table waits for a decision that never comes."""
    return verdict.judged(Row(
        benchmark=benchmark, work_package=str(work_package), label=f"work package {work_package.parent.name}",
        state="failed", reason=reason or f"the row model could not decide this row "
                                          f"({type(error).__name__}: {error})"))


def decide_now(work: Path) -> Row:
    """The row of an execute work package as the model decides it from what
    the work package holds now (its combine step has not run: no energy)."""
    return decide_or_fail(None, work)


# what reading a work package's files may raise (JUBE rewrites its record
# of the run in place as it goes: a read at that moment finds half of it)
READ_ERRORS = (OSError, ValueError, KeyError, ET.ParseError)


def decide_work_package(benchmark: str | None, work: Path, *, jpwr_out: Path | None = None,
                        jpwr_err: Path | None = None, jpwr_status: int | None = None,
                        slurm_state: SlurmState | None = None) -> Row:
    """The row of an execute work package from what it holds now (and its
    combine step's jpwr output, where given); READ_ERRORS where its files
    cannot be read. Slurm is asked for a queued job's state unless
    slurm_state stands in for it."""
    ev = gather(work, jpwr_out, jpwr_err, jpwr_status)
    name = ev.params.get("row_benchmark") or benchmark
    if slurm_state is None:
        return decide_row(name, ev)
    return decide_row(name, ev, slurm_state=slurm_state)


def decide_or_fail(benchmark: str | None, work: Path, *, jpwr_out: Path | None = None,
                   jpwr_err: Path | None = None, jpwr_status: int | None = None,
                   slurm_state: SlurmState | None = None) -> Row:
    try:
        return decide_work_package(benchmark, work, jpwr_out=jpwr_out, jpwr_err=jpwr_err,
                                   jpwr_status=jpwr_status, slurm_state=slurm_state)
    except READ_ERRORS as error:
        return undecided(benchmark, work.resolve(), error)


def rows_of_run(run_dir: Path, *, slurm_state: SlurmState | None = None) -> list[Row]:
    """Every row of a JUBE run directory: each one the combine step decided
    (row.json; one it cannot read is a failed row that names the file) and,
    for each execute work package whose combine step has not run, the one
    the model decides now from what that work package holds."""
    rows, decided = [], set()
    for path in sorted(run_dir.glob(f"*/work/{row_json.FILE_NAME}")):
        try:
            row = row_json.read(path)
        except ValueError as error:
            # the combine step's work folder links its execute work package
            link = path.parent / "execute"
            row = undecided(None, (link if link.is_dir() else path.parent).resolve(), error, str(error))
        rows.append(row)
        decided.add(_folder(row.work_package))
    for work in sorted(run_dir.glob("*_execute/work")):
        if _folder(str(work.resolve())) not in decided:
            rows.append(decide_or_fail(None, work, slurm_state=slurm_state))
    return rows + _not_started(run_dir)


def _folder(work_package: str) -> str:
    """A work package by its folder's name in the run (000001_execute): the
    same in a run folder copied or moved elsewhere, whose row.json still
    names the first place."""
    return Path(work_package).parent.name


def _data_step(wp: jube_run.WorkPackage) -> bool:
    """Whether the work package is its benchmark's data step."""
    entry = benchmarks.find(wp.params.get("row_benchmark"))
    return bool(entry and entry.data_step and wp.step == entry.data_step.step)


def _not_started(run_dir: Path) -> list[Row]:
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
        failed_data = _data_step(wp) and wp.id not in parents
        if not failed_data and (wp.step != "execute" or work.parent.exists()):
            continue
        texts = data_errors(work) if failed_data else data_step(run_dir, wp)
        ev = Evidence(texts, wp.params, str(work))
        try:
            row = decide_row(wp.params.get("row_benchmark"), ev, slurm_state=None)
        except ValueError as error:  # a work package that names no benchmark of the table
            rows.append(undecided(None, work, error))
            continue
        if failed_data and row.state != "failed":
            continue  # still preparing
        if row.state == "queued":
            # the run may be going on, or stopped: either is said
            row = verdict.judged(dataclasses.replace(
                row, reason="not started: JUBE starts it after the ones before it; where the run was "
                            "stopped jube continue goes on"))
        rows.append(row)
    return rows


