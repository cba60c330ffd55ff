"""Repeats: the measured rows of one configuration (the same system,
benchmark and every like-for-like parameter, batch and layout included)
from different runs, dates or repeat indices are one figure measured
several times. The comparison ranks on their median, shows their min-max
and how many runs it rests on, and gives a 95 % confidence interval on a
ratio of two such figures (caraml/compare/intervals.py from the runs'
figures; docs/compare.md, "Repeats and confidence intervals", says the
method and why).

Every figure comes from the rows' records as they are: nothing here
decides whether a row is a measurement (the caller gives measured rows)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from caraml.compare import intervals
from caraml.compare.rows import Line
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
# the as-run rounds' bootstrap (aux/perf/as_run.py): its resamples, and its
# seed, fixed so that the same rounds give the same interval every time
RESAMPLES = 2000
SEED = 41
# A single run's spread over its timed iterations: the 10th and 90th
# percentile of the iteration time, where the row records them
ITERATION_SPREAD = ("time_per_iteration_p10_s", "time_per_iteration_p90_s")
# the 10th to the 90th percentile of a normal distribution spans 2 x 1.2816 standard deviations
_P10_P90_SIGMAS = 2 * 1.2815516


def _word(value: object) -> str:
    """A value of a configuration as text: 512 and 512.0 alike (a column with
    a gap is float), NaN and None alike."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def top(frame: pd.DataFrame, column: str) -> pd.Series:
    """The row with the column's largest value (the first of equals; a
    missing value never)."""
    return frame.iloc[int(np.nanargmax(frame[column].to_numpy(dtype=float)))]


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
        line = group.iloc[int((order - (len(group) + 1) // 2).abs().to_numpy().argmin())].to_dict()
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


def floor(line: Line) -> float:
    """The least relative spread a run's figure can have: the standard
    error of its mean iteration time (the timed iterations' p10-p90 as a
    normal's spread, over the root of their count); NaN where the row records no such spread."""
    try:
        p10, p90, n, mean_s = (float(line[key]) for key in (*ITERATION_SPREAD, "timed_iterations",
                                                            "time_per_iteration_s"))
    except (KeyError, TypeError):  # not recorded (older rows), or None
        return math.nan
    if math.isnan(p10 + p90 + n + mean_s) or not n > 0 or not mean_s > 0:
        return math.nan
    return (p90 - p10) / _P10_P90_SIGMAS / math.sqrt(n) / mean_s


def run_values(line: Line, figure: str) -> tuple[float, ...]:
    """A configuration's figure as each of its runs measured it."""
    runs = int(line.get("runs", 1) or 1)
    return tuple(float(v) for v in line[f"{figure}_runs"]) if runs >= 2 else (float(line[figure]),)


def side(line: Line, figure: str) -> intervals.Side:
    return intervals.Side(str(line["system"]), run_values(line, figure), floor(line))


def interval(top: Line, bottom: Line, figure: str) -> tuple[float, float, str]:
    """The 95 % interval of top's figure over bottom's, and why there is none (empty where there is)."""
    return intervals.ratio_interval(side(top, figure), side(bottom, figure))


def runs_to_separate(top: Line, bottom: Line, figure: str,
                     ratio: float) -> int | None:
    """The runs a side that would separate a difference the size of ratio at the runs' spread."""
    return intervals.runs_to_separate(side(top, figure), side(bottom, figure), ratio)


# The as-run rounds' percentile bootstrap: paired rounds of one host, many of them
def bounds(ratios: np.ndarray) -> tuple[float, float, str]:
    tail = (1 - intervals.CONFIDENCE) / 2 * 100
    low, high = np.nanpercentile(ratios, [tail, 100 - tail])
    return float(low), float(high), ""


def spread(line: Line, figure: str, unit: str = "") -> str:
    """How many runs a figure rests on, and their range: `median of 3 runs, 18,000-19,400` or `1 run`."""
    runs = int(line.get("runs", 1) or 1)
    if runs < 2:
        return "1 run"
    return (f"median of {runs} runs, {number(line[f'{figure}_min'])}–"
            f"{number(line[f'{figure}_max'], unit)}")


def _size(ratio: float) -> str:
    return f"{(max(ratio, 1 / ratio) - 1) * 100:.0f} %"


def ratio_words(ratio: float, low: float, high: float, why_none: str = "", runs: int | None = None) -> str:
    """`1.06x, 95 % CI 1.04–1.08`; within the tie margin `1.01x, a tie
    (within 2 %), 95 % CI 0.98–1.04`; where the interval holds 1 `no
    significant difference: 1.05x, 95 % CI 0.98–1.13; 5 runs a side would
    separate 5 %` (runs: runs_to_separate's); without an interval, why."""
    tied = intervals.tie(ratio)
    said = f"{ratio:.2f}x" + (f", a tie (within {intervals.TIE_MARGIN * 100:.0f} %)" if tied else "")
    if pd.isna(low):
        return f"{said} (no interval: {why_none})"
    # two decimals on the ratio and both bounds alike, so that a bound that is 1 reads as one
    said = f"{said}, 95 % CI {low:.2f}–{high:.2f}"
    if tied or significant(low, high):
        return said
    more = (f"{runs} runs a side would separate {_size(ratio)}" if runs is not None
            else f"not even {intervals.MOST_RUNS:,} runs a side would separate {_size(ratio)}")
    return f"no significant difference: {said}; {more}"


def leader(best: str, runner_up: str | None, ratio: float) -> str:
    """Who leads a ranking: the first, or where the second is within the tie margin, both."""
    return f"{best} ties with {runner_up}" if runner_up is not None and intervals.tie(ratio) else best


def reference_words(line: Line, ratio: str, reference: str) -> str:
    """A line's ratio to the reference system (the column ratio, and its
    interval `<ratio>_low`, `_high` and `_no_interval` as figures.ratios
    gives them): `2.45x A100, 95 % CI 2.38–2.52`, or why no interval."""
    value, low, high = (line.get(f"{ratio}{end}", math.nan) for end in ("", "_low", "_high"))
    if pd.isna(low):
        return f"{number(value)}x {reference} (no interval: {line.get(f'{ratio}_no_interval')})"
    return f"{number(value)}x {reference}, 95 % CI {number(low)}–{number(high)}"


def significant(low: float, high: float) -> bool | None:
    return intervals.significant(low, high)
