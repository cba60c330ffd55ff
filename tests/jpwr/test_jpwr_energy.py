"""Energy from power samples: analytic traces, gaps, and the whole path
from the sampling thread to energy()."""

import math

import numpy as np
import pandas as pd
import pytest

from jpwr.ctxmgr import get_power
from jpwr.energy import energy_table, trapezoid


def trace(times, watts, device="gpu0"):
    return pd.DataFrame({"time": times, "method": "pynvml", "device": device,
                         "source": "measured", "power_w": watts})


def test_sine_on_a_ramp_matches_the_analytic_integral():
    # P(t) = 200 + 2 t + 100 sin(2 pi t / 7) W over 60 s, sampled every 100 ms.
    t = np.arange(0, 60.0001, 0.1)
    p = 200 + 2 * t + 100 * np.sin(2 * np.pi * t / 7)
    exact_j = 200 * 60 + 60**2 + 100 * 7 / (2 * np.pi) * (1 - np.cos(2 * np.pi * 60 / 7))
    row = energy_table(trace(t, p)).iloc[0]
    assert row.energy_wh == pytest.approx(exact_j / 3600, rel=5e-3)
    assert row.mean_w == pytest.approx(exact_j / 60, rel=5e-3)
    assert row.max_w == pytest.approx(p.max())
    assert (row.samples, row.missing, row.duration_s) == (601, 0, pytest.approx(60))


def test_irregular_spacing_is_integrated_by_the_actual_times():
    t = np.array([0.0, 1.0, 1.5, 4.0])
    p = np.array([10.0, 20.0, 20.0, 30.0])
    joules, covered = trapezoid(t, p)
    assert joules == pytest.approx(15 + 10 + 62.5)
    assert covered == pytest.approx(4.0)


def test_a_gap_adds_nothing_and_is_counted_as_missing():
    t = np.arange(0, 10.0, 1.0)
    p = np.full(10, 100.0)
    p[4:6] = np.nan
    row = energy_table(trace(t, p)).iloc[0]
    # Intervals 3-4, 4-5, 5-6 have a NaN end: 6 of 9 seconds are known.
    assert row.energy_wh == pytest.approx(600 / 3600)
    assert row.mean_w == pytest.approx(100.0)
    assert (row.samples, row.missing) == (8, 2)


def test_a_channel_that_never_answered_has_no_energy():
    row = energy_table(trace([0.0, 1.0, 2.0], [np.nan] * 3)).iloc[0]
    assert math.isnan(row.energy_wh) and math.isnan(row.max_w)
    assert row.missing == 3


def test_channels_are_kept_apart_in_order():
    both = pd.concat([trace([0, 1, 2], [1.0, 1.0, 1.0], "gpu1"),
                      trace([0, 1, 2], [3.0, 3.0, 3.0], "gpu0")])
    table = energy_table(both)
    assert list(table.device) == ["gpu1", "gpu0"]
    assert list(table.energy_wh * 3600) == pytest.approx([2.0, 6.0])


def test_sampled_synthetic_trace_matches_the_analytic_energy(synthetic, wait):
    # Through the sampling thread: P(t) = 150 + 50 sin(2 pi t / 0.4 s).
    def watts_at(t):
        return 150 + 50 * math.sin(2 * math.pi * t / 0.4)

    def exact_j(a, b):
        return 150 * (b - a) - 50 * 0.4 / (2 * math.pi) * (
            math.cos(2 * math.pi * b / 0.4) - math.cos(2 * math.pi * a / 0.4))

    with get_power([synthetic(watts_at)], 10) as scope:
        wait(lambda: len(scope.samples()) >= 100, "100 samples")
    row = scope.channel_energy()[0].iloc[0]
    assert row.samples >= 100
    assert row.energy_wh * 3600 == pytest.approx(exact_j(row.t_start, row.t_end), rel=5e-3)
