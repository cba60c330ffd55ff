"""Whether a run's energy files say what its samples and counters show:
each channel's energy and each named window's, counted again from the
power samples (power<suffix>.csv, over the run's span in its meta file)
and the counters' differences its files keep, with the functions that
wrote them (jpwr.energy), and every figure that differs named. What
`jpwr combine` adds up is then what the samples and counters hold."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from jpwr.aggregate import Run, Unreadable, find_runs, read_power_csv
from jpwr.energy import COUNTER, counter_first, energy_table, window_energy

# figures written with six or more significant digits from samples kept to
# the microsecond and the milliwatt: anything further apart was not counted
# from these samples
TOLERANCE = 0.005
# below this an energy is nothing to tell apart (a window of microseconds)
NEGLIGIBLE_WH = 1e-9
CHECKED = ("energy_wh", "integrated_wh")


def _epoch(text: object) -> float | None:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return None


def _differs(stated: float, counted: float) -> bool:
    if not (math.isfinite(stated) and math.isfinite(counted)):
        return math.isfinite(stated) != math.isfinite(counted)
    return abs(stated - counted) > max(TOLERANCE * abs(counted), NEGLIGIBLE_WH)


def _samples(run: Run) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    power = read_power_csv(run.path("power", "csv"))
    return {(str(m), str(d)): (g.sort_values("time", kind="stable")["time"].to_numpy(float),
                               g.sort_values("time", kind="stable")["power_w"].to_numpy(float))
            for (m, d), g in power.groupby(["method", "device"], sort=False)}


def _compare(where: str, stated: pd.Series, counted: dict) -> list[str]:
    return [f"{where}: {name} {float(stated[name]):.6g} Wh, its samples and counter give "
            f"{float(counted[name]):.6g} Wh" for name in CHECKED
            if name in stated and _differs(float(stated[name]), float(counted[name]))]


def channel_differences(run: Run) -> list[str]:
    """Each channel of the run's energy file whose figure its samples and counter do not give."""
    path = run.path("energy", "csv")
    if not path.is_file():
        return []  # a run that wrote none: combine counts it from its samples itself
    stated = pd.read_csv(path, dtype={"method": str, "device": str})
    meta = run.meta()
    start, end = _epoch(meta.get("start_time")), _epoch(meta.get("end_time"))
    span = (start, end) if start is not None and end is not None else None
    power = read_power_csv(run.path("power", "csv"))
    counters = {(str(r.method), str(r.device)): float(r.counter_wh) for r in stated.itertuples()
                if "counter_wh" in stated and r.basis == COUNTER and pd.notna(r.counter_wh)}
    counted = counter_first(energy_table(power, span), counters).set_index(["method", "device"])
    out = []
    for row in stated.itertuples(index=False):
        key = (str(row.method), str(row.device))
        where = f"{path.name} {key[0]} {key[1]}"
        if key not in counted.index:
            out.append(f"{where}: no samples of this channel in {run.path('power', 'csv').name}")
            continue
        out += _compare(where, pd.Series(row._asdict()), counted.loc[key].to_dict())
    return out


def window_differences(run: Run) -> list[str]:
    """Each named window of the run whose figure its samples and counter do not give."""
    path = run.path("windows", "csv")
    if not path.is_file():
        return []
    stated = pd.read_csv(path, dtype={"method": str, "device": str, "window": str})
    samples = _samples(run)
    out = []
    for row in stated.itertuples(index=False):
        key = (str(row.method), str(row.device))
        where = f"{path.name} window {row.window} {key[0]} {key[1]}"
        if key not in samples:
            out.append(f"{where}: no samples of this channel in {run.path('power', 'csv').name}")
            continue
        counter = float(row.counter_wh) if pd.notna(row.counter_wh) else np.nan
        counted = window_energy(*samples[key], float(row.t_start), float(row.t_end), counter)
        out += _compare(where, pd.Series(row._asdict()), counted)
    return out


def differences(paths: Iterable[str | Path]) -> list[str]:
    """Every figure of the runs under paths that their samples and counters
    do not give, one line each (the file, the channel, both figures); an
    unreadable file is named too."""
    out = []
    for run in find_runs(list(paths)):
        try:
            out += channel_differences(run) + window_differences(run)
        except (Unreadable, ValueError, KeyError, OSError) as err:
            out.append(f"{run.path('power', 'csv')}: cannot be counted again ({err})")
    return out
