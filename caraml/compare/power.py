"""The power samples jpwr flushed during each training job of a run, for
the power timeline: JUBE says which work package ran which configuration
(`jube info -c`), jpwr reads the samples each rank wrote."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pandas as pd

from jpwr.aggregate import NoEnergyData, find_runs, read_power_csv

SEPARATOR = "\t"


def work_packages(run_dir: Path) -> pd.DataFrame:
    """The execute step's work packages with their parameters; empty where
    JUBE cannot say (then there is no timeline, and the report says so)."""
    command = ["jube", "info", str(run_dir.parent), "-i", str(int(run_dir.name)), "-s", "execute",
               "-c", SEPARATOR]
    try:
        proc = subprocess.run(command, text=True, capture_output=True, timeout=120)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return pd.DataFrame()
    lines = [line for line in proc.stdout.splitlines() if SEPARATOR in line]
    if proc.returncode != 0 or len(lines) < 2:
        return pd.DataFrame()
    return pd.read_csv(io.StringIO("\n".join(lines)), sep=SEPARATOR, dtype=str, keep_default_na=False)


def samples(run_dir: Path, name: str) -> pd.DataFrame:
    """Every flushed sample of the run: label (name and batch), channel
    (method, device and rank suffix), seconds since the job's first sample,
    watts, and whether the sample is estimated."""
    frames = []
    for _, wp in work_packages(run_dir).iterrows():
        energy_dir = Path(wp.get("jube_wp_abspath", "")) / wp.get("energy_dir", "energy")
        try:
            runs = find_runs([energy_dir])
        except NoEnergyData:
            continue
        for run in runs:
            path = run.path("power", "csv")
            if not path.is_file():
                continue
            power = read_power_csv(path)
            if power.empty:
                continue
            power["t"] = power["time"] - power["time"].min()
            power["channel"] = power["method"] + ":" + power["device"] + run.suffix
            power["label"] = f"{name} batch {wp.get('global_batch_size', '?')}"
            power["estimated"] = power["source"].str.startswith("estimated")
            frames.append(power[["label", "channel", "t", "power_w", "estimated"]])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
