"""Repeats: the measured rows of one configuration (the same system,
benchmark and every like-for-like parameter, batch and layout included)
from different runs, dates or repeat indices are one figure measured
several times. The comparison ranks on their median, shows their min-max
and how many runs it rests on, and gives a 95 % confidence interval on a
ratio of two such figures by a seeded bootstrap (docs/compare.md, "Repeats
and confidence intervals", says the method and why).

Every figure comes from the rows' records as they are: nothing here
decides whether a row is a measurement (the caller gives measured rows)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from caraml.compare.units import number

# Rows are like for like when these agree: same benchmark, model, precision,
# sequence length or image size, and torch.compile mode (the operator
# benchmark's; n/a for the others). Batch and node count may differ.
LIKE = ["benchmark", "model", "precision", "size", "compile"]
GROUP = ["system", *LIKE]
# One configuration: the group and everything that sets how it ran; rows
# that agree on all of it are repeats of one measurement. Runs of another
# machine or build are not repeats (caraml/audit/identity.py names them)
CONFIG = [*GROUP, "backend", "global_batch", "nodes", "devices", "tp", "pp", "micro_batch",
          "machine", "build"]
# the figures a configuration's line holds as the median of its repeats
FIGURES = ["per_s", "per_s_per_device", "per_s_per_package", "per_s_per_node", "per_s_median", "mfu",
           "work_per_wh", "work_per_wh_gpu", "work_per_wh_timed", "power_w_per_device", "work_per_node_wh"]
CONFIDENCE = 0.95
RESAMPLES = 2000
# fixed, so that the same rows give the same interval on every run of the command
SEED = 41
# A single run's spread over its timed iterations: the 10th and 90th
# percentile of the iteration time, where the row records them
ITERATION_SPREAD = ("time_per_iteration_p10_s", "time_per_iteration_p90_s")
# the 10th to the 90th percentile of a normal distribution spans 2 x 1.2816 standard deviations
_P10_P90_SIGMAS = 2 * 1.2815516


def _word(value) -> str:
    """A value of a configuration as text: 512 and 512.0 alike (a column with a gap is float), NaN and None alike."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def config_key(rows: pd.DataFrame) -> pd.Series:
    """Each row's configuration as one text, the same for its repeats in any frame."""
    return pd.Series(["|".join(_word(v) for v in values) for values in rows[CONFIG].itertuples(index=False)],
                     index=rows.index, dtype=object)


def collapse(measured: pd.DataFrame) -> pd.DataFrame:
    """One line per configuration: its median run's row with each figure the
    median over the repeats, `runs` (how many), `<figure>_min`, `_max` and
    `_runs` (the values, in run order), the latest `date` and `config` (config_key)."""
    if measured.empty:
        return measured.assign(runs=pd.Series(dtype=int))
    lines = []
    for key, group in measured.groupby(config_key(measured), sort=False):
        order = group["per_s_per_device"].rank(method="first")
        # the run at the median (the lower one of an even count) stands for the others' words
        line = group.loc[(order - (len(group) + 1) // 2).abs().idxmin()].to_dict()
        line["runs"], line["config"] = len(group), key
        for figure in FIGURES:
            values = group[figure].astype(float)
            line[figure] = values.median()
            line[f"{figure}_min"], line[f"{figure}_max"] = values.min(), values.max()
            line[f"{figure}_runs"] = tuple(values)
        dates = group["date"].dropna().astype(str)
        line["date"] = max(dates) if not dates.empty else line["date"]
        lines.append(line)
    return pd.DataFrame(lines)


def _iteration_scale(line: pd.Series | dict, rng: np.random.Generator) -> np.ndarray | None:
    """One run: the rate's sampling spread from its timed iterations (their
    p10-p90 as a normal's spread, the mean of n of them), as factors on
    each figure; None where the row records no such spread."""
    p10, p90 = (line.get(key) for key in ITERATION_SPREAD)
    n, mean_s = line.get("timed_iterations"), line.get("time_per_iteration_s")
    if any(v is None or pd.isna(v) for v in (p10, p90, n, mean_s)) or not n or not mean_s:
        return None
    error = (p90 - p10) / _P10_P90_SIGMAS / math.sqrt(n)
    means = rng.normal(mean_s, error, RESAMPLES)
    return mean_s / np.clip(means, mean_s * 1e-3, None)


def draws(line: pd.Series | dict, figures: list[str], rng: np.random.Generator) -> dict[str, np.ndarray] | None:
    """Bootstrap draws of each figure's median: over the runs (the same
    resampled runs for every figure, so that a cost keeps its time and
    energy of one run together), or over the timed iterations of a single
    run; None where one run records no spread of its iterations."""
    runs = int(line.get("runs", 1) or 1)
    if runs >= 2:
        picks = rng.integers(0, runs, size=(RESAMPLES, runs))
        return {f: np.median(np.asarray(line[f"{f}_runs"], dtype=float)[picks], axis=1) for f in figures}
    scale = _iteration_scale(line, rng)
    return None if scale is None else {f: float(line[f]) * scale for f in figures}


def why_no_interval(line: pd.Series | dict) -> str:
    return f"{line['system']} rests on 1 run, whose row records no spread of its timed iterations"


def interval(top: pd.Series | dict, bottom: pd.Series | dict, figure: str) -> tuple[float, float, str]:
    """The 95 % interval of top's figure over bottom's, and why there is none (empty where there is)."""
    rng = np.random.default_rng(SEED)
    sides = [draws(top, [figure], rng), draws(bottom, [figure], rng)]
    for side, line in zip(sides, (top, bottom)):
        if side is None:
            return math.nan, math.nan, why_no_interval(line)
    return bounds(sides[0][figure] / sides[1][figure])


def bounds(ratios: np.ndarray) -> tuple[float, float, str]:
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.nanpercentile(ratios, [tail, 100 - tail])
    return float(low), float(high), ""


def spread(line: pd.Series | dict, figure: str, unit: str = "") -> str:
    """How many runs a figure rests on, and their range: `median of 3 runs, 18,000-19,400` or `1 run`."""
    runs = int(line.get("runs", 1) or 1)
    if runs < 2:
        return "1 run"
    return (f"median of {runs} runs, {number(line[f'{figure}_min'])}–"
            f"{number(line[f'{figure}_max'], unit)}")


def ratio_words(ratio: float, low: float, high: float, why_none: str = "") -> str:
    """`1.06x, 95 % CI 1.04–1.08`; where the interval holds 1, `no significant
    difference: 1.02x, 95 % CI 0.97–1.07`; without an interval, why."""
    if pd.isna(low):
        return f"{ratio:.2f}x (no interval: {why_none})"
    # two decimals on the ratio and both bounds alike, so that a bound that is 1 reads as one
    said = f"{ratio:.2f}x, 95 % CI {low:.2f}–{high:.2f}"
    return f"no significant difference: {said}" if low <= 1 <= high else said


def significant(low: float, high: float) -> bool | None:
    return None if pd.isna(low) else not low <= 1 <= high
