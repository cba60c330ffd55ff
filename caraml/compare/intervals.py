"""The interval on the ratio of two systems' figures, made to hold with a
few runs a side: Welch's t on the logarithms of the runs' figures, each
side's spread at least the pooled spread of both sides' runs and what its
own timed iterations imply, a side of one run taking the other side's
spread (where its row records its iterations' spread; else no interval). Also how many runs a side would
separate a difference the interval cannot, and the tie margin within which
neither system leads. docs/compare.md ("Repeats and confidence intervals")
says why, and the coverage between equal systems that
aux/perf/interval_coverage.py measured with these functions."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
# A lead of at most 2 % is a tie: one system's nodes differ among themselves
# by about that much (clocks, cooling, memory), and so do two software
# stacks a month apart, so a procurement cannot rest on less
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
        return np.log(values[np.isfinite(values) & (values > 0)])


@dataclass(frozen=True)
class _Spreads:
    """Each side's spread of a run's log figure and the degrees of freedom of their sum's estimate."""
    top: float
    bottom: float
    runs: tuple[int, int]
    borrowed: bool  # a side of one run took the other side's spread

    def error(self, runs: tuple[int, int]) -> float:
        return math.sqrt(self.top ** 2 / runs[0] + self.bottom ** 2 / runs[1])

    def freedom(self, runs: tuple[int, int]) -> float:
        """Welch-Satterthwaite's degrees of freedom; where one spread was
        borrowed, that of the side that measured it alone."""
        if self.borrowed:
            return max(runs) - 1
        parts = (self.top ** 2 / runs[0], self.bottom ** 2 / runs[1])
        return sum(parts) ** 2 / sum(p ** 2 / (n - 1) for p, n in zip(parts, runs))


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


def _t(freedom: float) -> float:
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, freedom))


def ratio_interval(top: Side, bottom: Side) -> tuple[float, float, str]:
    """The 95 % interval of top's figure over bottom's, and why there is none (empty where there is)."""
    spreads = _spreads(top, bottom)
    if isinstance(spreads, str):
        return math.nan, math.nan, spreads
    half = _t(spreads.freedom(spreads.runs)) * spreads.error(spreads.runs)
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
    size = abs(math.log(ratio))
    for n in range(max(2, min(spreads.runs) + 1), MOST_RUNS + 1):
        both = (n, n)
        # the hypothetical runs measure both spreads: Welch's freedom, nothing borrowed
        freedom = _Spreads(spreads.top, spreads.bottom, both, False).freedom(both)
        if _t(freedom) * spreads.error(both) < size:
            return n
    return None


def tie(ratio: float) -> bool:
    """A lead within the tie margin, as a sentence writes it (two decimals): neither system leads."""
    return ratio > 0 and round(max(ratio, 1 / ratio), 2) <= 1 + TIE_MARGIN


def significant(low: float, high: float) -> bool | None:
    """Whether the interval leaves out 1; None without one."""
    return None if math.isnan(low) else not low <= 1 <= high
