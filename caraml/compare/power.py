"""The power samples jpwr flushed during one training job, for the power
timelines: every rank's power file under the work package's energy folder,
and the named windows (the timed iterations) jpwr marked in it; and which
runs each configuration's timeline folds together (fold): one chart per
configuration rather than per run, so that the charts cost what a reader
looks at, however many repeats a configuration has."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from caraml.compare import repeats, rows
from caraml.compare.report import configuration
from jpwr.aggregate import NoEnergyData, find_runs, read_power_csv

ENERGY_DIR = "energy"  # platform.xml's energy_dir, inside the execute work package


@dataclass(frozen=True)
class Timeline:
    samples: pd.DataFrame  # channel, t (seconds since the job's first sample), power_w, estimated
    windows: pd.DataFrame  # window, start, end in the same seconds


@dataclass(frozen=True)
class Run:
    """One run of a configuration, as its timeline names it."""

    work_package: str
    name: str  # its JUBE run: outpath and run folder, and its date
    measurement: bool


@dataclass(frozen=True)
class Folded:
    """One configuration's timeline: its runs, the one that stands for it
    first (the median run of its measurements, as caraml/compare/repeats.py
    picks it; without a measurement, its first run)."""

    system: str
    title: str  # system, benchmark, configuration, batch and layout
    runs: tuple[Run, ...]


def timeline(work_package: str) -> Timeline | None:
    """The job's samples and windows; None where it flushed none."""
    energy_dir = Path(work_package) / ENERGY_DIR
    try:
        runs = find_runs([energy_dir])
    except NoEnergyData:
        return None
    frames, windows = [], []
    for run in runs:
        path = run.path("power", "csv")
        if path.is_file():
            power = read_power_csv(path)
            power["channel"] = power["method"] + ":" + power["device"] + run.suffix
            power["estimated"] = power["source"].str.startswith("estimated")
            frames.append(power)
        marks = run.path("windows", "csv")
        if marks.is_file():
            windows.append(pd.read_csv(marks, usecols=["window", "t_start", "t_end"]))
    frames = [f for f in frames if not f.empty]
    if not frames:
        return None
    power = pd.concat(frames, ignore_index=True)
    origin = power["time"].min()
    power["t"] = power["time"] - origin
    marked = pd.DataFrame(columns=["window", "start", "end"])
    if windows:
        spans = pd.concat(windows).groupby("window").agg(start=("t_start", "min"), end=("t_end", "max"))
        marked = (spans - origin).reset_index()
    return Timeline(power[["channel", "t", "power_w", "estimated"]], marked)


def _run(line: pd.Series) -> Run:
    return Run(str(line["work_package"]), rows.run_name(line), bool(line["measurement"]))


def fold(table: pd.DataFrame) -> list[Folded]:
    """One timeline per configuration (repeats.CONFIG) of the rows that ran,
    measurements or not (a short run's power is worth a look too), in the
    table's order."""
    ran = rows.ran(table)
    if ran.empty:
        return []
    keys = repeats.config_key(ran)
    done = rows.measured(ran)
    configs = repeats.collapse(done)
    standing = dict(zip(configs["config"], configs["work_package"])) if not done.empty else {}
    out = []
    for key, group in ran.groupby(keys, sort=False):
        first = group["work_package"] == standing.get(key, group["work_package"].iloc[0])
        ordered = pd.concat([group[first], group[~first]])
        line = ordered.iloc[0]
        out.append(Folded(str(line["system"]), f"{line['system']} {line['benchmark']} {configuration(line)}",
                          tuple(_run(run) for _, run in ordered.iterrows())))
    return out
