"""Finding JUBE run directories and reading the rows the row model decided
for them (row.json of either schema, and the rows of work packages the
combine step has not reached) into one frame, one line per configuration.

Every line holds the row's record under its own names
(caraml/row/render.py, compare_values): nothing the row holds is derived
again here, its verdict included (`measurement`, `not_a_measurement`).
The columns this module adds are the comparison's own: the system's name
on the command line, the like-for-like group (size, label, variant), the
power-limit point's place in a sweep, the accelerator package, where the
row came from, and its audit (caraml/audit: run folders and bundles alike
are read through it, each row's figures made again from its raw
evidence): its state and why, and the machine and build it ran on, which
repeats must share. A refused row, and an unaudited one unless the
comparison accepts those, is no measurement here, its why the audit's. A
run without a row, or with one that cannot be read, becomes a failed line
that says why, so the system stays in the comparison."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from caraml import benchmarks, jube_run
from caraml.audit import bundle, identity
from caraml.audit.decide import REFUSED, UNAUDITED, Audit
from caraml.audit.findings import ONE_NAME_PER_RUN
from caraml.audit.runs import Source, audits, sources
from caraml.compare import CompareError
from caraml.login import systems
from caraml.power_limit import DEFAULT as DEFAULT_LIMIT
from caraml.row import render, verdict
from caraml.row.record import Row
from caraml.row.run import undecided
from caraml.row.status import RAN

# a line of the comparison: a row of its table, or that row as a dict
Line = pd.Series | Mapping[str, Any]


@dataclass(frozen=True)
class RunDir:
    path: Path
    system: str | None  # the label given on the command line; None: the row's system name
    rows: tuple[Path, ...] | None = None  # a bundle's row files (None: the run's own)
    name: str = ""  # how messages name the run: its folder, or a bundle's file and run


# a system's name on the command line (A100, MI250X, GH200-module, ...)
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def _labelled(argument: str) -> tuple[Path, str | None]:
    """`SYSTEM=PATH` or `PATH`. A label is a word before the first `=`
    (no `/`), so a path may hold `=` itself (runs/bs=512); an argument that
    is a folder as it stands is a path."""
    label, sep, given = argument.partition("=")
    if not sep or Path(argument).is_dir() or not _LABEL.fullmatch(label):
        return Path(argument), None
    return Path(given), label


def find_run_dirs(argument: str, all_runs: bool = False) -> list[RunDir]:
    """The run directories behind one command-line argument, `[SYSTEM=]PATH`:
    a run directory, a JUBE outpath (its latest run, or all with all_runs), or
    a directory holding outpaths."""
    path, label = _labelled(argument)
    if not path.is_dir():
        raise CompareError(f"{path}: no such directory; give a JUBE run directory or its outpath")
    runs = jube_run.runs_under(path, all_runs)
    if not runs:
        raise CompareError(f"{path}: not a JUBE run directory (no {jube_run.RECORD} in it or "
                           "in a numbered folder below it); give the outpath of a `jube run`")
    return [RunDir(p, label) for p in runs]


def _size(row: Row) -> tuple[float, str]:
    """The size two rows must share to be like for like: the LLM's sequence
    length, the image benchmark's image size. An operator row's problem,
    in its model's name, fixes its grid: it has no size, and its label
    says how the model ran (eager, or the torch.compile mode)."""
    entry = benchmarks.find(row.benchmark)
    if entry is None:
        return math.nan, "size n/a"
    if entry.size is None:
        mode = row.compile
        return math.nan, "eager" if mode in (None, "", "none") else f"compile {mode}"
    key, label, missing = entry.size
    size = getattr(row, key)
    return (math.nan, missing) if size is None else (float(size), label.format(size))


def _limit(row: Row) -> dict:
    """Where the row's power limit stands in a sweep: swept at all (the job
    asked for a point), and whether it is the sweep's `default` point (it
    asks for no watts: it measures the limit the devices had)."""
    if row.power_limit is None:
        return {"limit_swept": False, "limit_default": True}
    return {"limit_swept": True, "limit_default": row.power_limit == DEFAULT_LIMIT}


def line(row: Row, run: RunDir, path: Path, audit: Audit | None = None) -> dict:
    """One row as one line of the comparison: its record, then the comparison's own columns
    (a row read without its audit, from the history: its identity as its record says it)."""
    size, size_label = _size(row)
    entry = benchmarks.find(row.benchmark)
    values = render.compare_values(row)
    model, precision = values["model"], values["precision"]
    ident = audit.identity if audit is not None else identity.of_record(row, str(path))
    return {
        # a run still going names its state's why where its status gives none (the verdict's words)
        **values, "reason": values["reason"] or verdict.UNFINISHED.get(row.state, ""),
        "system": run.system or values["system_name"],
        "size": size, "size_label": size_label, "like": f"{model} {precision} {size_label}",
        "variant": values["backend"] if entry is not None and entry.variant_by_backend else size_label,
        **_limit(row), "work_package": row.work_package or str(path.parent.parent),
        "row_file": str(path), "run_dir": run.name or str(run.path),
        "audit": audit.state if audit is not None else "",
        "audit_why": audit.why if audit is not None else "",
        "machine": ident.machine, "hosts": ident.host_set, "build": ident.build, "run_key": ident.run}


def columns() -> list[str]:
    """The comparison's columns, as line gives them (read when a table is
    made: a site's CARAML_BENCHMARKS that fails is then caraml-compare's
    one-line error, not a traceback as the module is imported)."""
    return list(line(Row(), RunDir(Path("."), None), Path("x/work/row.json")))


def _failed(run: RunDir, path: Path, reason: str) -> dict:
    """A line for a run that gave no row: the system stays in the report with the reason."""
    failed = line(undecided(None, path, ValueError(reason), reason), run, path)
    return {**failed, "system": run.system or f"{run.path.parent.name}/{run.path.name}", "benchmark": "n/a"}


def read_run(run: RunDir) -> list[dict]:
    """The run's lines, as the row model decided them, each with its audit:
    one per configuration (its row.json, or the model's decision where the
    last step has not run), a failed line where the run holds none."""
    found = audits(Source(run.path, run.rows, run.name or str(run.path)))
    if not found:
        return [_failed(run, run.path, f"{run.path} holds no work package: the run stopped before "
                        f"its first job (jube status {run.path.parent})")]
    return [line(a.row, run, a.row_file, a) for a in found]


def _read(argument: str, all_runs: bool) -> list[dict]:
    """The lines of one argument: run folders, or a bundle (read while it is unpacked)."""
    path, label = _labelled(argument)
    if not bundle.is_bundle(path):
        return [found for run in find_run_dirs(argument, all_runs) for found in read_run(run)]
    try:
        with sources(path) as runs:
            return [found for source in runs
                    for found in read_run(RunDir(source.run, label, source.rows, source.name))]
    except (bundle.BundleError, bundle.Refused) as err:
        said = f"{path}: refused: {err}" if isinstance(err, bundle.Refused) else str(err)
        raise CompareError(said) from None


def _audited(rows: pd.DataFrame, accept_unaudited: bool) -> pd.DataFrame:
    """The lines as a ranking may take them: a refused row, and an
    unaudited measurement unless accepted, is no measurement here, its why
    the audit's; one run given twice (under two names or one) is refused."""
    places = [f"{run}/{Path(wp).parent.name}" for run, wp in zip(rows["run_dir"], rows["work_package"])]
    twice = identity.given_twice(list(zip(rows["system"], rows["run_key"], places)))
    if twice:
        raise CompareError(f"{twice[0]}: one run is one system's, counted once; give it once "
                           f"({ONE_NAME_PER_RUN})")
    refused = rows["audit"] == REFUSED
    unaccepted = (rows["audit"] == UNAUDITED) & rows["measurement"].astype(bool) & (not accept_unaudited)
    why = rows["not_a_measurement"].where(~refused, "refused by the audit: " + rows["audit_why"])
    why = why.where(~unaccepted, rows["audit_why"] + "; caraml-compare --accept-unaudited ranks it unaudited")
    # audit_excluded: the audit, not the row's own verdict, keeps it from a ranking
    return rows.assign(measurement=rows["measurement"].astype(bool) & ~refused & ~unaccepted,
                       not_a_measurement=why, audit_excluded=refused | unaccepted)


def apart(rows: pd.DataFrame) -> list[str]:
    """Each system whose rows that ran come from several machines or builds (not pooled as repeats)."""
    done = ran(rows)
    return identity.apart(list(zip(done["system"], done["machine"], done["build"])))


def shown_name(line: pd.Series | dict) -> str:
    """A system as a sentence names it: an unaudited row's says so."""
    return f"{line['system']} (unaudited)" if line.get("audit") == UNAUDITED else str(line["system"])


def load(arguments: list[str], all_runs: bool = False, accept_unaudited: bool = False) -> pd.DataFrame:
    """Every line of every run and bundle the arguments name, failed ones
    included, as a ranking may take them (_audited)."""
    lines = [found for argument in arguments for found in _read(argument, all_runs)]
    rows = _audited(pd.DataFrame(lines, columns=columns()), accept_unaudited)
    # a failed line without a benchmark belongs to each benchmark its system ran
    known = rows[rows["benchmark"] != "n/a"].groupby("system")["benchmark"].first()
    rows.loc[rows["benchmark"] == "n/a", "benchmark"] = rows["system"].map(known).fillna("n/a")
    return with_packages(rows)


def with_packages(rows: pd.DataFrame) -> pd.DataFrame:
    """Adds the accelerator package of each row's system as platform.xml
    declares it (package_unit, devices_per_package) and the throughput per
    package; NaN for a system platform.xml does not know."""
    packages = {tag: system.package for tag, system in systems.load().items() if system.package}
    known = rows["system_name"].map(packages)
    rows = rows.assign(package_unit=known.map(lambda p: p[0] if isinstance(p, tuple) else "n/a"),
                       devices_per_package=known.map(lambda p: p[1] if isinstance(p, tuple) else math.nan))
    return rows.assign(per_s_per_package=rows["per_s_per_device"] * rows["devices_per_package"])


def at_default_limit(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows that rank each system (run at the devices' own limit: no
    sweep, or a sweep's `default` point) and the sweep's capped points,
    which are never ranked beside them as if they were another system."""
    return rows[rows["limit_default"]], rows[~rows["limit_default"]]


def ran(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows whose job ran to a figure, measurements or not."""
    return rows[rows["state"].isin(RAN)]


def measured(rows: pd.DataFrame) -> pd.DataFrame:
    """The measurements, by the row's own verdict."""
    return rows[rows["measurement"].astype(bool)]


def cause(line: Line) -> str:
    """Why a line is no measurement, as every part of the report says it: the
    verdict of a row that ran, else its state and reason (the verdict's why)."""
    why = line["not_a_measurement"]
    return verdict.shown(why) if line["state"] in RAN else why


def run_name(line: pd.Series) -> str:
    """The run a row came from, as a reader finds it: its outpath, run folder and date."""
    folder = Path(str(line["run_dir"]))
    date = "" if line["date"] in ("n/a", None) else f" of {str(line['date'])[:10]}"
    # a bundle's run is named by the bundle's file and the run, with no folder above it
    where = f"{folder.parent.name}/{folder.name}" if folder.parent.name else folder.name
    return f"{where}{date}"


def check_comparable(rows: pd.DataFrame) -> None:
    """Something must have run (a row that is no measurement is shown, marked); and two or
    more systems that ran something must share a benchmark."""
    ok = ran(rows)
    if ok.empty:
        reasons = "; ".join(dict.fromkeys(f"{s}: {r}" for s, r in zip(rows["system"], rows["reason"])))
        raise CompareError(f"nothing to compare: no row of the {rows['system'].nunique()} system(s) ran "
                           f"({reasons[:300]})")
    by_system = ok.groupby("system", sort=False)["benchmark"].agg(lambda b: sorted(set(b)))
    if len(by_system) >= 2 and ok.groupby("benchmark")["system"].nunique().max() < 2:
        which = "; ".join(f"{system} ran {' and '.join(b)}" for system, b in by_system.items())
        raise CompareError(f"{ok['run_dir'].iloc[0]} and the other runs: no common benchmark ({which}); "
                           "give runs of one benchmark from at least two systems")
