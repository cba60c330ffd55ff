"""From iteration times to the figures the benchmark reports: tokens/s,
TFLOP/s per device (with and without recomputation) and MFU."""

from __future__ import annotations

import math
from dataclasses import dataclass

from caraml import report
from caraml.device_peaks import MEASURED, Peak
from caraml.node.timing import rate
from llm_training.flops import IterationFlops, iteration_flops, iteration_tokens
from llm_training.matmul_rate import MatmulRate
from llm_training.model_sizes import GPTConfig


@dataclass(frozen=True)
class Workload:
    """What one training iteration processes, on how many devices."""

    tokens: int  # global batch size x sequence length
    flops: IterationFlops
    devices: int

    @classmethod
    def of(cls, gpt: GPTConfig, global_batch_size: int, recompute: str, devices: int) -> Workload:
        return cls(tokens=iteration_tokens(gpt, global_batch_size),
                   flops=iteration_flops(gpt, global_batch_size, recompute), devices=devices)

    def tokens_per_s(self, seconds_per_iteration: float) -> float:
        return rate(self.tokens, seconds_per_iteration)

    def tflops_per_device(self, seconds_per_iteration: float) -> float:
        """What the devices executed, recomputation included."""
        return rate(self.flops.hardware, seconds_per_iteration) / self.devices / 1e12

    def model_tflops_per_device(self, seconds_per_iteration: float) -> float:
        """The model's own FLOPs only: the MFU numerator."""
        return rate(self.flops.model, seconds_per_iteration) / self.devices / 1e12


def peak_fields(peak: Peak) -> dict[str, float | int | str | None]:
    """The summary's words on the peak: its value, basis and table key, and
    for a measured one the windows' count, the slowest, the median and the
    spread (else nan)."""
    r = MatmulRate(peak.windows) if peak.windows else None
    return dict(peak_tflops=peak.tflops, peak_basis=peak.basis, peak_key=peak.key,
                peak_windows=len(peak.windows),
                peak_min_tflops=min(r.windows) if r else math.nan,
                peak_median_tflops=r.median if r else math.nan,
                peak_spread_pct=r.spread_pct if r else math.nan)


def mfu_unavailable(model_tflops: float, peak: Peak, foreign_cpu_pct: float | None) -> str | None:
    """Why a measured peak cannot be MFU's denominator, or None. Other
    processes kept the host busy while the run trained (foreign_cpu_pct:
    their share of the busiest host's CPU time, report.CONTENTION_PCT or
    more), where a load that holds every window down alike passes the two
    floors below; and two floors: the device's dense matmul rate cannot be
    below the rate the model's own matmuls reached on it (MFU above 1); and
    at least half the windows must reach half the kept (best) rate: where
    fewer do, another job held the host through most of the measurement,
    and its best window is as likely disturbed as the rest (0.028 TFLOP/s
    kept, median 0.006, where the host's undisturbed windows give 0.2)."""
    if peak.basis != MEASURED:
        return None
    contended = report.contended_peak_refusal(foreign_cpu_pct)
    if contended:
        return contended
    if model_tflops > peak.tflops:
        return (f"measured-matmul-rate-{peak.tflops:.4g}-TFLOP/s-is-below-the-model's-own-"
                f"{model_tflops:.4g}-TFLOP/s-per-device")
    near = sum(w >= peak.tflops / 2 for w in peak.windows)
    if 2 * near < len(peak.windows):
        return (f"only-{near}-of-{len(peak.windows)}-matmul-windows-reached-half-the-"
                f"best-{peak.tflops:.4g}-TFLOP/s:-the-host-was-too-busy-to-measure-its-rate")
    return None


def throughput(workload: Workload, mean_s: float, median_s: float, peak: Peak, *,
               foreign_cpu_pct: float | None = None) -> dict[str, float]:
    """The summary's throughput figures for a time per iteration; all nan
    when no iteration was timed (mean_s nan). foreign_cpu_pct: the
    contention the run saw (the driver loop's; None: not measured)."""
    tokens_per_s = workload.tokens_per_s(mean_s)
    model_tflops = workload.model_tflops_per_device(mean_s)
    why = mfu_unavailable(model_tflops, peak, foreign_cpu_pct)
    return dict(
        time_per_iteration_s=mean_s,
        time_per_iteration_median_s=median_s,
        tokens_per_s=tokens_per_s,
        tokens_per_s_median=workload.tokens_per_s(median_s),
        tokens_per_s_per_device=tokens_per_s / workload.devices,
        tflops_per_device=workload.tflops_per_device(mean_s),
        model_tflops_per_device=model_tflops,
        # nan when the peak is unknown or refused (mfu_unavailable says why)
        mfu=math.nan if why else model_tflops / peak.tflops,
        mfu_unavailable=why or "-",
    )
