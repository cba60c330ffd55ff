"""Throughput figures from the timed iterations of every rank.

A rank's figure divides its batch by its own iteration time. The global
figure divides the global batch by the time of the slowest rank in each
iteration (data parallelism waits for it in the gradient all-reduce), so it
never claims more than the job delivered. Mean and median are taken over
iteration times, and images/s derived from them (not averaged rates)."""

from __future__ import annotations

from collections.abc import Sequence

from caraml.timing import TimingStats, rate, summarize


def _rates(batch: int, times: TimingStats) -> dict[str, float]:
    mean_s, median_s = times.mean_s, times.median_s
    return {
        "mean_s": mean_s,
        "median_s": median_s,
        "images_per_s_mean": rate(batch, mean_s),
        "images_per_s_median": rate(batch, median_s),
    }


def per_rank(batch_per_device: int, durations: Sequence[float]) -> dict[str, float]:
    """The metrics of one `CARAML rank <r>:` line."""
    r = _rates(batch_per_device, summarize(durations))
    return {
        "images_per_s_mean": r["images_per_s_mean"],
        "images_per_s_median": r["images_per_s_median"],
        "time_per_iteration_s": r["mean_s"],
    }


def overall(global_batch: int, job: TimingStats, devices: int) -> dict[str, float]:
    """The timing metrics of the `CARAML global:` line, from the job's
    iterations (each as long as its slowest rank's)."""
    r = _rates(global_batch, job)
    return {
        "time_per_iteration_s": r["mean_s"],
        "time_per_iteration_median_s": r["median_s"],
        "images_per_s_mean": r["images_per_s_mean"],
        "images_per_s_median": r["images_per_s_median"],
        "images_per_s_per_device": r["images_per_s_mean"] / devices,
    }
