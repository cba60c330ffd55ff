"""From iteration times to the figures the benchmark reports: tokens/s,
TFLOP/s per device (with and without recomputation) and MFU."""

from __future__ import annotations

from dataclasses import dataclass

from caraml.device_peaks import Peak
from caraml.timing import rate
from llm_training.flops import IterationFlops, iteration_flops, iteration_tokens
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


def throughput(workload: Workload, mean_s: float, median_s: float, peak: Peak) -> dict[str, float]:
    """The summary's throughput figures for a time per iteration; all nan
    when no iteration was timed (mean_s nan)."""
    tokens_per_s = workload.tokens_per_s(mean_s)
    model_tflops = workload.model_tflops_per_device(mean_s)
    return dict(
        time_per_iteration_s=mean_s,
        time_per_iteration_median_s=median_s,
        tokens_per_s=tokens_per_s,
        tokens_per_s_median=workload.tokens_per_s(median_s),
        tokens_per_s_per_device=tokens_per_s / workload.devices,
        tflops_per_device=workload.tflops_per_device(mean_s),
        model_tflops_per_device=model_tflops,
        mfu=model_tflops / peak.tflops,  # nan when the peak is unknown
    )
