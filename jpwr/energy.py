"""Energy from power samples. Samples are points of a power curve and are
integrated with the trapezoid rule; an interval with a NaN end (a channel
that did not answer) adds nothing, and its samples show in `missing`."""

from __future__ import annotations

import numpy as np
import pandas as pd

POWER_COLUMNS = ["time", "method", "device", "source", "power_w"]
CHANNEL_KEY = ["method", "device", "source"]
ENERGY_COLUMNS = [*CHANNEL_KEY, "energy_wh", "mean_w", "max_w", "duration_s",
                  "samples", "missing", "t_start", "t_end"]


def trapezoid(times: np.ndarray, watts: np.ndarray) -> tuple[float, float]:
    """(energy in J, seconds covered by intervals with both ends known)."""
    steps = np.diff(times)
    middles = 0.5 * (watts[1:] + watts[:-1])
    known = np.isfinite(middles)
    return float(np.sum(middles[known] * steps[known])), float(np.sum(steps[known]))


def channel_energy(times: np.ndarray, watts: np.ndarray) -> dict:
    joules, covered = trapezoid(times, watts)
    answered = np.isfinite(watts)
    return {
        "energy_wh": joules / 3600 if covered > 0 else np.nan,
        "mean_w": joules / covered if covered > 0 else np.nan,
        "max_w": float(np.max(watts[answered])) if answered.any() else np.nan,
        "duration_s": float(times[-1] - times[0]),
        "samples": int(answered.sum()),
        "missing": int((~answered).sum()),
        "t_start": float(times[0]),
        "t_end": float(times[-1]),
    }


def energy_table(power: pd.DataFrame) -> pd.DataFrame:
    """One row per channel of a long power table (POWER_COLUMNS)."""
    rows = []
    for key, samples in power.groupby(CHANNEL_KEY, sort=False):
        samples = samples.sort_values("time", kind="stable")
        rows.append(dict(zip(CHANNEL_KEY, key)) | channel_energy(
            samples["time"].to_numpy(float), samples["power_w"].to_numpy(float)))
    return pd.DataFrame(rows, columns=ENERGY_COLUMNS)
