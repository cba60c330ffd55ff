"""The measured matmul rate behind --peak-tflops measure: its arithmetic,
with a clock the test controls."""

import pytest
import torch

from llm_training import matmul_rate


class TickingClock:
    """Advances `step` seconds at every reading."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_rate_is_matmul_flops_over_time(monkeypatch):
    # Each reading is 1 s later: one 256 x 256 product already takes more
    # than 1/50 of the 1.5 s budget, so n stays 256; the timed loop reads the
    # clock once before and once per product, stopping after 2 products (2 s).
    monkeypatch.setattr(matmul_rate.time, "perf_counter", TickingClock(1.0))
    rate = matmul_rate.measure_tflops(torch.device("cpu"), torch.float32, seconds=1.5)
    assert rate == pytest.approx(2 * 256**3 * 2 / 2.0 / 1e12)


def test_matrices_grow_while_a_product_is_quick(monkeypatch):
    # Readings 10 ms apart: a product "takes" 10 ms, below 1/50 of 0.6 s, so
    # the side doubles up to the largest one; then 60 products fill 0.6 s.
    monkeypatch.setattr(matmul_rate, "LARGEST_SIDE", 512)
    monkeypatch.setattr(matmul_rate.time, "perf_counter", TickingClock(0.01))
    rate = matmul_rate.measure_tflops(torch.device("cpu"), torch.float32, seconds=0.6)
    assert rate == pytest.approx(2 * 512**3 / 0.01 / 1e12)
