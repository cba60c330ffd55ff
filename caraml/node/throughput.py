"""Throughput figures from the timed iterations of every rank, for the
benchmarks that count whole samples (images, operator samples).

A rank's figure divides its batch by its own iteration time. The global
figure divides the global batch by the time of the slowest rank in each
iteration (data parallelism waits for it in the gradient all-reduce), so it
never claims more than the job delivered. Mean and median are taken over
iteration times, and the rates derived from them (not averaged rates).
`unit` names the figures: `images` gives images_per_s_mean and so on."""

from __future__ import annotations

from collections.abc import Sequence

from caraml.node.timing import TimingStats, rate, summarize


def per_rank(unit: str, batch_per_device: int, durations: Sequence[float]) -> dict[str, float]:
    """The metrics of one `CARAML rank <r>:` line."""
    times = summarize(durations)
    return {
        f"{unit}_per_s_mean": rate(batch_per_device, times.mean_s),
        f"{unit}_per_s_median": rate(batch_per_device, times.median_s),
        "time_per_iteration_s": times.mean_s,
    }


def overall(unit: str, global_batch: int, job: TimingStats, devices: int) -> dict[str, float]:
    """The timing metrics of the `CARAML global:` line, from the job's
    iterations (each as long as its slowest rank's)."""
    mean = rate(global_batch, job.mean_s)
    return {
        "time_per_iteration_s": job.mean_s,
        "time_per_iteration_median_s": job.median_s,
        f"{unit}_per_s_mean": mean,
        f"{unit}_per_s_median": rate(global_batch, job.median_s),
        f"{unit}_per_s_per_device": mean / devices,
    }
