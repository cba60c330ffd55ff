"""The power samples jpwr flushed during one training job, for its power
timeline: every rank's power file under the work package's energy folder,
and the named windows (the timed iterations) jpwr marked in it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from jpwr.aggregate import NoEnergyData, find_runs, read_power_csv

ENERGY_DIR = "energy"  # platform.xml's energy_dir, inside the execute work package


@dataclass(frozen=True)
class Timeline:
    samples: pd.DataFrame  # channel, t (seconds since the job's first sample), power_w, estimated
    windows: pd.DataFrame  # window, start, end in the same seconds


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
