"""The training loop both backends share: timing without the warm-up,
Megatron-style log lines, and a stop that all ranks take at the same
iteration, whether the iteration count, the wall-clock budget or a signal
asked for it."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from caraml import report
from caraml.dist import Dist
from caraml.energy import TimedWindow
from caraml.stopping import StopCondition
from caraml.timing import IterationTimer
from llm_training.metrics import Workload


class Backend(Protocol):
    name: str
    attention: str
    data_parallel_rank: int

    def train_step(self, batches: Iterator[dict]) -> float | None:
        """One iteration; this rank's mean loss, or None where it has no loss
        (pipeline stages before the last)."""


@dataclass
class LoopResult:
    iterations: int  # all, warm-up included
    durations: list[float]  # of this rank's timed iterations; empty: none timed
    loss: float  # mean over the last logging interval and all ranks
    stop_reason: str


@dataclass
class _Interval:
    """Loss and time since the last log line, on this rank."""

    loss_sum: float = 0.0
    loss_count: int = 0
    seconds: float = 0.0
    iterations: int = 0

    def add(self, loss: float | None, seconds: float) -> None:
        if loss is not None:
            self.loss_sum += loss
            self.loss_count += 1
        self.seconds += seconds
        self.iterations += 1


def train(backend: Backend, batches: Iterator[dict], dist: Dist, stop: StopCondition, *,
          warmup: int, log_interval: int, max_iterations: int, workload: Workload,
          timed_window: TimedWindow | None = None) -> LoopResult:
    timer = IterationTimer(warmup, sync=dist.sync)
    timed_window = timed_window or TimedWindow(None, sync=lambda: None)
    interval = _Interval()
    loss = math.nan
    done = 0
    reason = stop.reason(done)  # a signal may have come during set-up
    stopping = dist.any_rank(reason is not None)
    while not stopping:
        if done == warmup:
            timed_window.begin()
        timer.start()
        step_loss = backend.train_step(batches)
        done += 1
        # Deciding to stop is part of the iteration's cost, so it is timed.
        reason = stop.reason(done)
        stopping = dist.any_rank(reason is not None)
        interval.add(step_loss, timer.stop())
        if stopping or done % log_interval == 0:
            loss = _log(dist, done, max_iterations, interval, workload)
            interval = _Interval()
    timed_window.end()
    # A rank that saw no reason of its own stops because another one did.
    return LoopResult(done, timer.durations, loss, reason or "stop requested by another rank")


def _log(dist: Dist, iteration: int, max_iterations: int, interval: _Interval,
         workload: Workload) -> float:
    """Prints one Megatron-style line on rank 0; returns the interval's loss."""
    ranks = dist.gather_floats([interval.loss_sum, interval.loss_count,
                                interval.seconds / interval.iterations])
    count = sum(r[1] for r in ranks)
    loss = sum(r[0] for r in ranks) / count if count else math.nan
    seconds = max(r[2] for r in ranks)  # the slowest rank sets the pace
    if dist.is_main:
        report.write_line(f" iteration {iteration:8d}/{max_iterations:8d} |"
                          f" elapsed time per iteration (ms): {seconds * 1e3:.1f} |"
                          f" tokens/s: {workload.tokens_per_s(seconds):.1f} |"
                          f" TFLOP/s per device: {workload.tflops_per_device(seconds):.4g} |"
                          f" lm loss: {loss:.6E} |")
    return loss
