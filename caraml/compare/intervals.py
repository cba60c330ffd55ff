"""The interval on the ratio of two systems' figures, made to hold with a
few runs a side: Welch's t on the logarithms of the runs' figures, each
side's spread at least the pooled spread of both sides' runs and what its
own timed iterations imply; a side of one run takes the other side's
spread on one degree of freedom (where its row records its iterations'
spread; else no interval).
Also how many runs a side would separate a difference the interval
cannot, and the tie margin within which neither system leads.
docs/compare.md ("Repeats and confidence intervals") says why, and the
coverage between equal systems that aux/perf/interval_coverage.py
measured with these functions."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
# A lead of at most 2 % is a tie: a centre buys other nodes than those
# measured, which differ among themselves (power and clock bins, cooling,
# memory) and run other software months later; a judgement, argued in docs
TIE_MARGIN = 0.02
# "N runs a side would separate" looks no further
MOST_RUNS = 1000


@dataclass(frozen=True)
class Side:
    """One system's figure as its runs measured it."""
    name: str
    values: tuple[float, ...]  # the figure of each run
    # the least relative spread a run's figure can have: the standard error of
    # the run's mean iteration time from its timed iterations; NaN where the
    # row records no spread of them
    floor: float = math.nan

    def logs(self) -> np.ndarray:
        values = np.asarray(self.values, dtype=float)
        logs: np.ndarray = np.log(values[np.isfinite(values) & (values > 0)])
        return logs


@dataclass(frozen=True)
class _Spreads:
    """Each side's spread of a run's log figure and the degrees of freedom of their sum's estimate."""
    top: float
    bottom: float
    runs: tuple[int, int]
    borrowed: bool  # a side of one run took the other side's spread

    def error(self) -> float:
        return math.sqrt(self.top ** 2 / self.runs[0] + self.bottom ** 2 / self.runs[1])

    def freedom(self) -> float:
        """Welch-Satterthwaite's degrees of freedom; where a side of one run
        took the other side's spread, 1: that it runs as steadily as the
        other system is an assumption its one run cannot check (it may be
        the slow one), so the interval counts the fewest degrees of freedom
        a spread is measured on, not the other side's."""
        if self.borrowed:
            return 1.0
        parts = (self.top ** 2 / self.runs[0], self.bottom ** 2 / self.runs[1])
        return sum(parts) ** 2 / sum(p ** 2 / (n - 1) for p, n in zip(parts, self.runs))


def _spreads(top: Side, bottom: Side) -> _Spreads | str:
    """The sides' spreads, or why there are none. Each side's is its own
    runs', at least the pooled spread of both sides' runs (a side of two runs
    measures its own on one degree of freedom, often far too small by
    chance) and at least its floor; a side of one run takes the pooled
    spread, which is the other side's."""
    logs = (top.logs(), bottom.logs())
    runs = (len(logs[0]), len(logs[1]))
    if min(runs) == 0:
        return f"{(top, bottom)[runs.index(0)].name} has no figure"
    if max(runs) == 1:
        return f"{top.name} and {bottom.name} have 1 run each"
    for side, n in zip((top, bottom), runs):
        if n == 1 and math.isnan(side.floor):
            return f"{side.name} rests on 1 run, whose row records no spread of its timed iterations"
    own = [float(np.var(x, ddof=1)) if len(x) > 1 else 0.0 for x in logs]
    pooled = sum((n - 1) * v for n, v in zip(runs, own)) / (sum(runs) - 2)
    spread = [max(math.sqrt(max(v, pooled)), 0.0 if math.isnan(s.floor) else s.floor)
              for v, s in zip(own, (top, bottom))]
    if spread == [0.0, 0.0]:
        return f"the runs of {top.name} and {bottom.name} agree exactly"
    return _Spreads(spread[0], spread[1], runs, min(runs) == 1)


def _centre(top: Side, bottom: Side) -> float:
    return float(np.mean(top.logs()) - np.mean(bottom.logs()))


def ratio_interval(top: Side, bottom: Side) -> tuple[float, float, str]:
    """The 95 % interval of top's figure over bottom's, and why there is none (empty where there is)."""
    spreads = _spreads(top, bottom)
    if isinstance(spreads, str):
        return math.nan, math.nan, spreads
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, spreads.freedom())) * spreads.error()
    centre = _centre(top, bottom)
    return math.exp(centre - half), math.exp(centre + half), ""


def runs_to_separate(top: Side, bottom: Side, ratio: float) -> int | None:
    """The runs a side at which an interval at these spreads would no longer
    hold 1 for a difference the size of ratio: the first count, above the
    fewer side's, whose half-width falls below it; None without a spread or
    beyond MOST_RUNS."""
    spreads = _spreads(top, bottom)
    if isinstance(spreads, str) or not ratio > 0 or ratio == 1:
        return None
    first, second = spreads.top ** 2, spreads.bottom ** 2
    runs = np.arange(max(2, min(spreads.runs) + 1), MOST_RUNS + 1)
    # as many runs on each side measure both spreads: Welch's freedom, nothing borrowed
    freedom = (runs - 1) * (first + second) ** 2 / (first ** 2 + second ** 2)
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, freedom) * np.sqrt((first + second) / runs)
    enough = np.flatnonzero(half < abs(math.log(ratio)))
    return int(runs[enough[0]]) if enough.size else None


def tie(ratio: float) -> bool:
    """A lead within the tie margin, as a sentence writes it (two decimals): neither system leads."""
    return ratio > 0 and round(max(ratio, 1 / ratio), 2) <= 1 + TIE_MARGIN


def significant(low: float, high: float) -> bool | None:
    """Whether the interval leaves out 1; None without one."""
    return None if math.isnan(low) else not low <= 1 <= high
