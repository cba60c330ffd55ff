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
