"""The measured matmul rate behind --peak-tflops measure: its arithmetic,
with a clock the test controls, the rule that keeps one rate of several
windows, and the floor below which MFU is refused."""

import math

import pytest
import torch

from caraml import device_peaks, report
from caraml.device_peaks import MEASURED
from llm_training import matmul_rate
from llm_training.matmul_rate import MatmulRate
from llm_training.metrics import Workload, peak_fields, throughput
from llm_training.model_sizes import GPTConfig


class TickingClock:
    """Advances `step` seconds at every reading."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class ScriptedClock:
    """Returns the given readings in turn."""

    def __init__(self, readings):
        self.readings = iter(readings)

    def __call__(self) -> float:
        return next(self.readings)


def test_peak_is_the_fastest_product_not_the_average(monkeypatch):
    # The sizing product takes 3 s (more than 1/50 of the budget: n stays 256);
    # then, within the 10 s budget, products take 2 s, 1 s (fastest) and 4 s,
    # as when other jobs share the host part of the time.
    readings = [0, 3,            # sizing product
                3,               # deadline = 3 + 10
                3, 3, 5,         # loop check, start, end: 2 s
                5, 5, 6,         # 1 s
                6, 6, 10,        # 4 s
                13]              # loop check: past the deadline
    monkeypatch.setattr(matmul_rate.time, "perf_counter", ScriptedClock(readings))
    rate = matmul_rate.measure_tflops(torch.device("cpu"), torch.float32, seconds=10)
    assert rate == pytest.approx(2 * 256**3 / 1.0 / 1e12)


def test_matrices_grow_while_a_product_is_quick(monkeypatch):
    # Readings 10 ms apart: a product "takes" 10 ms, below 1/50 of 0.6 s, so
    # the side doubles up to the largest one, at which the rate is taken.
    monkeypatch.setattr(matmul_rate, "LARGEST_SIDE", 512)
    monkeypatch.setattr(matmul_rate.time, "perf_counter", TickingClock(0.01))
    rate = matmul_rate.measure_tflops(torch.device("cpu"), torch.float32, seconds=0.6)
    assert rate == pytest.approx(2 * 512**3 / 0.01 / 1e12)


# Five windows in a row on the shared development host, one of them held by
# another job through every product (TFLOP/s)
COLLAPSING = (0.204, 0.0014, 0.211, 0.190, 0.030)


def test_the_best_window_is_kept_and_the_spread_reported():
    rate = MatmulRate(COLLAPSING)
    assert rate.tflops == 0.211
    assert rate.median == 0.190
    assert rate.spread_pct == pytest.approx(100 * (0.211 - 0.0014) / 0.211)
    # windows after training join those before it
    assert (rate + MatmulRate((0.25,))).tflops == 0.25


def test_a_measurement_is_several_windows_each_its_fastest_product(monkeypatch):
    monkeypatch.setattr(matmul_rate, "LARGEST_SIDE", 512)
    monkeypatch.setattr(matmul_rate.time, "perf_counter", TickingClock(0.01))
    rate = matmul_rate.measure(torch.device("cpu"), torch.float32, windows=4, seconds=4.0)
    assert rate.windows == pytest.approx((2 * 512**3 / 0.01 / 1e12,) * 4)


def test_a_real_measurement_gives_plausible_windows():
    rate = matmul_rate.measure(torch.device("cpu"), torch.float32, windows=3, seconds=0.3)
    assert len(rate.windows) == 3 and all(w > 0 for w in rate.windows)
    assert rate.tflops == max(rate.windows)


def _measured(rate: MatmulRate) -> device_peaks.Peak:
    return device_peaks.measured(rate.tflops, rate.windows)


def _model_tflops_at(seconds: float) -> tuple[Workload, float]:
    gpt = GPTConfig(num_layers=4, hidden_size=256, num_attention_heads=4, ffn_hidden_size=1024,
                    seq_length=256, vocab_size=4096)
    workload = Workload.of(gpt, 4, "none", 1)
    return workload, workload.model_tflops_per_device(seconds)


def test_a_measured_peak_below_the_models_own_rate_refuses_mfu():
    workload, model = _model_tflops_at(0.5)
    low = _measured(MatmulRate((model / 10, model / 20)))
    figures = throughput(workload, 0.5, 0.5, low)
    assert math.isnan(figures["mfu"])
    assert figures["mfu_unavailable"].startswith("measured-matmul-rate-")
    assert "below-the-model's-own" in figures["mfu_unavailable"]
    assert " " not in figures["mfu_unavailable"] and "," not in figures["mfu_unavailable"]
    ok = _measured(MatmulRate((model * 2, model * 4, model * 4)))
    figures = throughput(workload, 0.5, 0.5, ok)
    assert figures["mfu"] == pytest.approx(0.25) and figures["mfu_unavailable"] == "-"
    # a stated peak is the user's: never refused
    stated = throughput(workload, 0.5, 0.5, device_peaks.given(model / 10))
    assert stated["mfu"] == pytest.approx(10) and stated["mfu_unavailable"] == "-"


def test_the_summary_names_the_windows_behind_a_measured_peak():
    fields = peak_fields(_measured(MatmulRate(COLLAPSING)))
    assert fields == {"peak_tflops": 0.211, "peak_basis": MEASURED, "peak_key": None, "peak_windows": 5,
                      "peak_min_tflops": 0.0014, "peak_median_tflops": 0.190,
                      "peak_spread_pct": pytest.approx(99.34, abs=0.01)}
    assert peak_fields(device_peaks.PEAKS["A100"])["peak_windows"] == 0


def test_a_rate_most_windows_fall_far_below_is_refused():
    workload, model = _model_tflops_at(0.5)
    # the series (one window in five collapsed, one in four below half): kept
    steady = _measured(MatmulRate(tuple(model * 100 * w / 0.211 for w in COLLAPSING)))
    assert throughput(workload, 0.5, 0.5, steady)["mfu_unavailable"] == "-"
    # a host held through most of the measurement: best 0.028, median 0.006
    busy = _measured(MatmulRate(tuple(model * 100 * w for w in
                                          (0.028, 0.006, 0.001, 0.02, 0.005, 0.006))))
    figures = throughput(workload, 0.5, 0.5, busy)
    assert math.isnan(figures["mfu"])
    assert figures["mfu_unavailable"].startswith("only-2-of-6-matmul-windows-reached-half-the-best-")
    assert " " not in figures["mfu_unavailable"] and "," not in figures["mfu_unavailable"]


def test_a_peak_measured_on_a_contended_host_is_refused_from_the_shared_threshold():
    """Windows held down alike pass their own floors; the host's contention
    (report.CONTENTION_PCT, the row model's threshold too) refuses them. A
    stated peak is the user's and stays."""
    workload, model = _model_tflops_at(0.5)
    ok = _measured(MatmulRate((model * 2, model * 4, model * 4)))
    at = report.CONTENTION_PCT
    refused = throughput(workload, 0.5, 0.5, ok, foreign_cpu_pct=at)
    assert math.isnan(refused["mfu"])
    assert refused["mfu_unavailable"] == \
        f"matmul-rate-measured-on-a-host-whose-CPU-other-processes-used-{at:.0f}%"
    assert " " not in refused["mfu_unavailable"] and "," not in refused["mfu_unavailable"]
    below = throughput(workload, 0.5, 0.5, ok, foreign_cpu_pct=at - 0.1)
    assert below["mfu"] == pytest.approx(0.25) and below["mfu_unavailable"] == "-"
    stated = throughput(workload, 0.5, 0.5, device_peaks.given(model * 4), foreign_cpu_pct=90.0)
    assert stated["mfu"] == pytest.approx(0.25)
