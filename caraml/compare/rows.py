"""Finding JUBE run directories and reading the rows the row model decided
for them (row.json of either schema, and the rows of work packages the
combine step has not reached) into one frame, one line per configuration.

Every line holds the row's record under its own names
(caraml/row/render.py, compare_values): nothing the row holds is derived
again here, its verdict included (`measurement`, `not_a_measurement`).
The columns this module adds are the comparison's own: the system's name
on the command line, the like-for-like group (size, label, variant), the
power-limit point's place in a sweep, the accelerator package, and where
the row came from. A run without a row, or with one that cannot be read,
becomes a failed line that says why, so the system stays in the comparison."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from caraml import benchmarks, jube_run
from caraml.compare import CompareError
from caraml.login import systems
from caraml.power_limit import DEFAULT as DEFAULT_LIMIT
from caraml.row import render, row_json, verdict
from caraml.row.record import Row
from caraml.row.run import rows_of_run, undecided
from caraml.row.status import MEASURED


@dataclass(frozen=True)
class RunDir:
    path: Path
    system: str | None  # the label given on the command line; None: the row's system name


# a system's name on the command line (A100, MI250X, GH200-module, ...)
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def _is_run_dir(path: Path) -> bool:
    return path.name.isdigit() and jube_run.is_run(path)


def _runs_of_outpath(path: Path, all_runs: bool) -> list[Path]:
    runs = sorted((p for p in path.iterdir() if p.is_dir() and _is_run_dir(p)), key=lambda p: int(p.name))
    return runs if all_runs else runs[-1:]


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
    if _is_run_dir(path):
        return [RunDir(path, label)]
    runs = _runs_of_outpath(path, all_runs)
    if not runs:
        for child in sorted(p for p in path.iterdir() if p.is_dir()):
            runs += _runs_of_outpath(child, all_runs)
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


def line(row: Row, run: RunDir, path: Path) -> dict:
    """One row as one line of the comparison: its record, then the comparison's own columns."""
    size, size_label = _size(row)
    entry = benchmarks.find(row.benchmark)
    values = render.compare_values(row)
    model, precision = values["model"], values["precision"]
    return {
        **values, "system": run.system or values["system_name"],
        "size": size, "size_label": size_label, "like": f"{model} {precision} {size_label}",
        "variant": values["backend"] if entry is not None and entry.variant_by_backend else size_label,
        **_limit(row), "work_package": row.work_package or str(path.parent.parent),
        "row_file": str(path), "run_dir": str(run.path)}


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
    """The run's lines, as the row model decides them: one per configuration
    (its row.json, or the model's decision where the last step has not run),
    a failed line where the run holds none."""
    rows = rows_of_run(run.path)
    if not rows:
        return [_failed(run, run.path, f"{run.path} holds no work package: the run stopped before "
                        f"its first job (jube status {run.path.parent})")]
    return [line(row, run, Path(row.work_package or run.path) / row_json.FILE_NAME) for row in rows]


def load(arguments: list[str], all_runs: bool = False) -> pd.DataFrame:
    """Every line of every run the arguments name, failed ones included."""
    lines = [found for argument in arguments for run in find_run_dirs(argument, all_runs)
             for found in read_run(run)]
    rows = pd.DataFrame(lines, columns=columns())
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
    return rows[rows["state"].isin(MEASURED)]


def measured(rows: pd.DataFrame) -> pd.DataFrame:
    """The measurements, by the row's own verdict."""
    return rows[rows["measurement"].astype(bool)]


def cause(line: pd.Series | dict) -> str:
    """Why a line is no measurement, as every part of the report says it: the
    verdict of a row that ran, else its state and reason (the verdict's why)."""
    why = line["not_a_measurement"]
    return verdict.shown(why) if line["state"] in MEASURED else why


def run_name(line: pd.Series) -> str:
    """The run a row came from, as a reader finds it: its outpath, run folder and date."""
    folder = Path(str(line["run_dir"]))
    date = "" if line["date"] in ("n/a", None) else f" of {str(line['date'])[:10]}"
    return f"{folder.parent.name}/{folder.name}{date}"


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
