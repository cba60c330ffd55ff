"""Energy from power samples and hardware counters.

Samples are points of a power curve and are integrated with the trapezoid
rule; an interval with a NaN end (a channel that did not answer) adds
nothing, and its samples show in `missing`. Where the hardware has an energy
counter of the same scope as the power reading, the counter's difference is
the figure (`basis` counter) and the integral its cross-check; elsewhere the
integral is the figure (`basis` integrated). A window with fewer than two
samples inside is bridged from the power curve around it (`basis`
interpolated); a window that holds a gap is left empty (NaN), never filled
with a reading from before the gap. A measured run's row covers it from
its start to its stop: the curve is held from the start to the first
sample and from the last sample to the stop."""

from __future__ import annotations

import numpy as np
import pandas as pd

from jpwr.counting import scope_of

POWER_COLUMNS = ["time", "method", "device", "source", "power_w"]
CHANNEL_KEY = ["method", "device", "source"]
ENERGY_COLUMNS = [*CHANNEL_KEY, "energy_wh", "mean_w", "max_w", "duration_s",
                  "samples", "missing", "t_start", "t_end"]
# Columns newer than the files of older jpwr versions; read_energy fills them.
COUNTER_COLUMNS = ["scope", "basis", "integrated_wh", "counter_wh", "counter_vs_integrated_pct"]
COUNTER = "counter"
INTEGRATED = "integrated"
INTERPOLATED = "interpolated"


def trapezoid(times: np.ndarray, watts: np.ndarray) -> tuple[float, float]:
    """(energy in J, seconds covered by intervals with both ends known)."""
    steps = np.diff(times)
    middles = 0.5 * (watts[1:] + watts[:-1])
    known = np.isfinite(middles)
    return float(np.sum(middles[known] * steps[known])), float(np.sum(steps[known]))


def window_joules(times: np.ndarray, watts: np.ndarray, begin: float, end: float) -> tuple[float, int]:
    """(energy in J between begin and end, answered samples inside). The
    power at the window's edges is interpolated linearly from the samples
    around them (held at the nearest one beyond the first or last), so a
    window between two samples still gets its share. A window that holds a
    gap (a sample inside it, or the nearest one on either side, unanswered)
    gets NaN: the power before a gap says nothing about the power in it."""
    answered = np.isfinite(watts)
    inside = (times > begin) & (times < end)
    around = inside.copy()
    if (before := np.flatnonzero(times <= begin)).size:
        around[before[-1]] = True
    if (after := np.flatnonzero(times >= end)).size:
        around[after[0]] = True
    if not answered[around].all():
        return np.nan, int((inside & answered).sum())
    return _bridged(times, watts, begin, end)


def _bridged(times: np.ndarray, watts: np.ndarray, begin: float, end: float) -> tuple[float, int]:
    """window_joules over the answered samples only, gaps bridged."""
    answered = np.isfinite(watts)
    t, p = times[answered], watts[answered]
    if len(t) == 0 or not end >= begin:
        return np.nan, 0
    inside = (t > begin) & (t < end)
    edges_t = np.concatenate(([begin], t[inside], [end]))
    edges_p = np.concatenate(([np.interp(begin, t, p)], p[inside], [np.interp(end, t, p)]))
    return trapezoid(edges_t, edges_p)[0], int(inside.sum())


def window_energy(times: np.ndarray, watts: np.ndarray, begin: float, end: float, counter_wh: float) -> dict:
    """One channel's figures over a named window: the counter's difference
    where the channel has one of its scope (counter_wh finite), else the
    window's integral (interpolated where fewer than two samples lie inside)."""
    joules, inside = window_joules(times, watts, begin, end)
    integrated = joules / 3600
    if np.isfinite(counter_wh):
        energy, basis = counter_wh, COUNTER
    else:
        energy, basis = integrated, INTEGRATED if inside >= 2 else INTERPOLATED
    return {"energy_wh": energy, "basis": basis, "integrated_wh": integrated, "counter_wh": counter_wh,
            "samples": inside}


def channel_energy(times: np.ndarray, watts: np.ndarray, span: tuple[float, float] | None = None) -> dict:
    """One channel's row. Given `span` (the measured run's start and end),
    the row covers it: the curve is held from the run's start to the first
    sample and from the last sample to the run's end where those samples
    answered, and with fewer than two answered samples the one reading is
    held over the whole span."""
    joules, covered = trapezoid(times, watts)
    answered = np.isfinite(watts)
    basis = INTEGRATED
    run = span if span is not None and span[1] > span[0] else None
    if covered <= 0 and answered.any() and run is not None:
        # one answered sample: the run's only reading stands for all of it
        joules, _ = _bridged(times, watts, *run)
        covered, basis = run[1] - run[0], INTERPOLATED
    elif covered > 0 and run is not None:
        # The first sample comes a priming delay after the start (or, on
        # busy cores, whenever the sampler first runs); a counter-based
        # method's first reading is the power since the start.
        for edge, gap in ((0, times[0] - run[0]), (-1, run[1] - times[-1])):
            if answered[edge] and gap > 0:
                joules += watts[edge] * gap
                covered += gap
    energy_wh = joules / 3600 if covered > 0 else np.nan
    start, end = (run or (times[0], times[-1])) if len(times) else (np.nan, np.nan)
    return {
        "energy_wh": energy_wh,
        "mean_w": joules / covered if covered > 0 else np.nan,
        "max_w": float(np.max(watts[answered])) if answered.any() else np.nan,
        "duration_s": float(end - start),
        "samples": int(answered.sum()),
        "missing": int((~answered).sum()),
        "t_start": float(start),
        "t_end": float(end),
        "basis": basis,
        "integrated_wh": energy_wh,
    }


def energy_table(power: pd.DataFrame, span: tuple[float, float] | None = None) -> pd.DataFrame:
    """One row per channel of a long power table (POWER_COLUMNS)."""
    rows = []
    for key, samples in power.groupby(CHANNEL_KEY, sort=False):
        samples = samples.sort_values("time", kind="stable")
        scope = scope_of(str(key[0]), str(key[1]))
        rows.append(dict(zip(CHANNEL_KEY, key)) | {"scope": scope} | channel_energy(
            samples["time"].to_numpy(float), samples["power_w"].to_numpy(float), span))
    table = pd.DataFrame(rows, columns=[*ENERGY_COLUMNS, "scope", "basis", "integrated_wh"])
    table["counter_wh"] = np.nan
    table["counter_vs_integrated_pct"] = np.nan
    return table[[*ENERGY_COLUMNS, *COUNTER_COLUMNS]]


def counter_first(table: pd.DataFrame, counters: dict[tuple[str, str], float]) -> pd.DataFrame:
    """Puts each hardware counter's figure (Wh, keyed by method and device,
    of the same scope as the channel) in place of the integral, which stays
    beside it with the difference in per cent."""
    table = table.copy()
    for i, row in table.iterrows():
        counter_wh = counters.get((row["method"], row["device"]), np.nan)
        if not np.isfinite(counter_wh):
            continue
        integrated = row["integrated_wh"]
        table.loc[i, "counter_wh"] = counter_wh
        table.loc[i, "counter_vs_integrated_pct"] = (
            100 * (integrated - counter_wh) / counter_wh if counter_wh else np.nan)
        table.loc[i, "energy_wh"] = counter_wh
        table.loc[i, "basis"] = COUNTER
        if row["duration_s"] > 0:
            table.loc[i, "mean_w"] = counter_wh * 3600 / row["duration_s"]
    return table


def complete_energy_columns(table: pd.DataFrame) -> pd.DataFrame:
    """An energy table of an older jpwr, with the newer columns filled in:
    integrated figures of the scope the channel has."""
    table = table.copy()
    if "scope" not in table:
        table["scope"] = [scope_of(m, d) for m, d in zip(table["method"], table["device"])]
    if "basis" not in table:
        table["basis"] = INTEGRATED
    if "integrated_wh" not in table:
        table["integrated_wh"] = table["energy_wh"]
    for column in ("counter_wh", "counter_vs_integrated_pct"):
        if column not in table:
            table[column] = np.nan
    return table
