"""Whether a run's energy files say what its samples and counters show:
each channel's energy and each named window's, counted again from the
power samples (power<suffix>.csv, over the run's span in its meta file)
and the counters' differences its files keep, with the functions that
wrote them (jpwr.energy), and every figure that differs named. What
`jpwr combine` adds up is then what the samples and counters hold."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from jpwr.aggregate import Run, Unreadable, read_job, read_power_csv
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


def _number(value: object) -> float:
    """A cell of a table as a float (NaN where it is empty or no number)."""
    try:
        return float(value)  # type: ignore[arg-type]  # whatever pandas read; a non-number is NaN
    except (TypeError, ValueError):
        return math.nan


def _records(table: pd.DataFrame) -> list[dict[str, object]]:
    return [{str(key): value for key, value in row.items()} for row in table.to_dict("records")]


def _samples(run: Run) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    power = read_power_csv(run.path("power", "csv"))
    out = {}
    for (method, device), group in power.groupby(["method", "device"], sort=False):
        ordered = group.sort_values("time", kind="stable")
        out[(str(method), str(device))] = (ordered["time"].to_numpy(float),
                                           ordered["power_w"].to_numpy(float))
    return out


def _compare(where: str, stated: dict[str, object], counted: dict[str, object]) -> list[str]:
    return [f"{where}: {name} {_number(stated[name]):.6g} Wh, its samples and counter give "
            f"{_number(counted[name]):.6g} Wh" for name in CHECKED
            if name in stated and _differs(_number(stated[name]), _number(counted[name]))]


def _against(run: Run, stated: list[dict[str, object]], where: Callable[[dict[str, object]], str],
             recount: Callable[[tuple[str, str], dict[str, object]], dict[str, object] | None]) -> list[str]:
    """Each stated line (a channel's or a window's) against its recount;
    recount gives None for a channel with no samples."""
    out = []
    for row in stated:
        key = (str(row["method"]), str(row["device"]))
        counted = recount(key, row)
        if counted is None:
            out.append(f"{where(row)}: no samples of this channel in {run.path('power', 'csv').name}")
        else:
            out += _compare(where(row), row, counted)
    return out


def channel_differences(run: Run, meta: dict) -> list[str]:
    """Each channel of the run's energy file whose figure its samples and
    counter do not give (meta: the run's meta file, its span)."""
    path = run.path("energy", "csv")
    if not path.is_file():
        return []  # a run that wrote none: combine counts it from its samples itself
    stated = _records(pd.read_csv(path, dtype={"method": str, "device": str}))
    start, end = _epoch(meta.get("start_time")), _epoch(meta.get("end_time"))
    span = (start, end) if start is not None and end is not None else None
    counters = {(str(r["method"]), str(r["device"])): _number(r.get("counter_wh")) for r in stated
                if r.get("basis") == COUNTER and math.isfinite(_number(r.get("counter_wh")))}
    counted = {(str(r["method"]), str(r["device"])): r for r in _records(
        counter_first(energy_table(read_power_csv(run.path("power", "csv")), span), counters))}
    return _against(run, stated, lambda row: f"{path.name} {row['method']} {row['device']}",
                    lambda key, row: counted.get(key))


def window_differences(run: Run) -> list[str]:
    """Each named window of the run whose figure its samples and counter do not give."""
    path = run.path("windows", "csv")
    if not path.is_file():
        return []
    samples = _samples(run)

    def recount(key: tuple[str, str], row: dict[str, object]) -> dict[str, object] | None:
        if key not in samples:
            return None
        return window_energy(*samples[key], _number(row["t_start"]), _number(row["t_end"]),
                             _number(row.get("counter_wh")))

    stated = _records(pd.read_csv(path, dtype={"method": str, "device": str, "window": str}))

    def where(row: dict[str, object]) -> str:
        return f"{path.name} window {row['window']} {row['method']} {row['device']}"

    return _against(run, stated, where, recount)


def differences(paths: Iterable[str | Path]) -> list[str]:
    """Every figure of the runs under paths that their samples and counters
    do not give, one line each (the file, the channel, both figures); an
    unreadable file is named too. The runs are those `jpwr combine` counts
    (an earlier run of a rank that a later one replaced is not)."""
    job = read_job(list(paths))
    out = []
    for run, meta in zip(job.runs, job.metas):
        try:
            out += channel_differences(run, meta) + window_differences(run)
        except (Unreadable, ValueError, KeyError, OSError) as err:
            out.append(f"{run.path('power', 'csv')}: cannot be counted again ({err})")
    return out
