"""Iteration timing for throughput: warm-up left out, device synchronised
before every timer read, so a figure is the time the device really took."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass
class TimingStats:
    iterations: int
    mean_s: float
    median_s: float
    # the spread: 10th and 90th percentile (inclusive method: within the iterations' range)
    p10_s: float
    p90_s: float

    def spread(self) -> dict[str, float]:
        """The summary line's spread of the iteration time: p10, p50, p90."""
        return {"time_per_iteration_p10_s": self.p10_s, "time_per_iteration_p50_s": self.median_s,
                "time_per_iteration_p90_s": self.p90_s}


@dataclass(frozen=True)
class Timed:
    """The iterations timed so far: how many, and how long together."""

    iterations: int = 0
    seconds: float = 0.0


@dataclass
class IterationTimer:
    """Times iterations; the first `warmup` ones are run but not recorded."""

    warmup: int
    sync: Callable[[], None] = lambda: None
    clock: Callable[[], float] = time.perf_counter
    durations: list[float] = field(default_factory=list)
    seen: int = 0
    _t0: float | None = None
    # the durations' sum, kept as they come: so_far() runs every iteration,
    # and a sum over thousands of them would cost the loop more each time
    _timed_s: float = 0.0

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise ValueError(f"warm-up iterations must be >= 0, got {self.warmup}")

    def start(self) -> None:
        self.sync()
        self._t0 = self.clock()

    def stop(self) -> float:
        if self._t0 is None:
            raise RuntimeError("IterationTimer.stop() called before start()")
        self.sync()
        elapsed = self.clock() - self._t0
        self._t0 = None
        self.seen += 1
        if self.seen > self.warmup:
            self.durations.append(elapsed)
            self._timed_s += elapsed
        return elapsed


    def so_far(self) -> Timed:
        """The timed iterations with the running one as long as it has run
        where it is timed: a lower bound of what it will take (the clock is
        read without the device's sync), so a window it closes stays closed."""
        if self._t0 is None or self.seen < self.warmup:
            return Timed(len(self.durations), self._timed_s)
        return Timed(len(self.durations) + 1, self._timed_s + self.clock() - self._t0)


def summarize(durations: Sequence[float]) -> TimingStats:
    d = list(durations)
    deciles = statistics.quantiles(d, n=10, method="inclusive") if len(d) > 1 else d * 9
    return TimingStats(
        iterations=len(d),
        mean_s=statistics.fmean(d),
        median_s=statistics.median(d),
        p10_s=deciles[0],
        p90_s=deciles[-1],
    )


def slowest_per_iteration(durations_by_rank: Sequence[Sequence[float]]) -> list[float]:
    """Per iteration, the longest time any rank took: data-parallel ranks wait
    for each other in every gradient all-reduce, so the job's iteration takes
    as long as its slowest rank's, and a global figure never claims more."""
    return [max(times) for times in zip(*durations_by_rank, strict=True)]


def rate(items_per_iteration: float, seconds_per_iteration: float) -> float:
    """Items per second; the one place throughput is derived from a time."""
    if seconds_per_iteration <= 0:
        raise ValueError(f"iteration time must be positive, got {seconds_per_iteration}")
    return items_per_iteration / seconds_per_iteration
