"""aux/perf/as_run.py, the peer scripts' as-run comparison, with real
processes in place of the drivers and the plain loops (each a few lines of
Python without torch): the driver's figures read from its summary line, the
plain loop's from its line, the sides by turns, and the ratios. It measures
nothing: every figure here is given."""

from __future__ import annotations

import math
import statistics
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "aux" / "perf"))

import as_run  # noqa: E402


def test_the_drivers_figures_come_from_its_last_summary_line(tmp_path):
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent("""\
        print("CARAML global: time_per_iteration_median_s=9 cpu_s_per_iteration=9")
        print("CARAML global: time_per_iteration_median_s=0.25 cpu_s_per_iteration=0.5 loss=3")
        """))
    assert as_run.suite_run([str(driver), "x"], {}) == as_run.Run(0.25, 0.5)


@pytest.mark.parametrize("printed, says", [
    ("CARAML global: time_per_iteration_median_s=- cpu_s_per_iteration=-", "no timed figure"),
    ("import sys; sys.exit(3)", "ended with status 3"),
])
def test_a_driver_without_a_figure_fails_the_comparison_with_one_line(tmp_path, printed, says):
    driver = tmp_path / "driver.py"
    driver.write_text(printed if printed.startswith("import") else f"print({printed!r})\n")
    with pytest.raises(as_run.RunFailed, match=says):
        as_run.suite_run([str(driver), "x"], {})


def test_the_plain_loop_times_its_iterations_in_a_process_of_its_own(tmp_path):
    """time_plain in the child prints what plain_run reads back."""
    script = tmp_path / "peer.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(Path(as_run.__file__).parent)!r})
        import as_run
        assert sys.argv[1:] == ["--plain", "--size", "3"]
        steps = []
        as_run.time_plain(lambda: steps.append(1), warmup=2, iterations=5, sync=lambda: None)
        assert len(steps) == 7
        """))
    run = as_run.plain_run(script, ["--size", "3"], {})
    assert run.median_s >= 0 and run.cpu_s >= 0


def test_the_sides_take_turns_and_the_ratio_is_the_plain_loops_time_over_the_suites():
    order, said = [], []
    suite = iter([as_run.Run(1.0, 2.0), as_run.Run(2.0, 2.0), as_run.Run(1.0, 1.0)])
    plain = iter([as_run.Run(0.9, 1.0), as_run.Run(2.2, 3.0), as_run.Run(1.0, 1.0)])
    runs = as_run.interleaved(3, lambda: order.append("suite") or next(suite),
                              lambda: order.append("plain") or next(plain), say=said.append)
    assert order == ["suite", "plain", "plain", "suite", "suite", "plain"]
    assert len(said) == 3
    s = as_run.summary(runs)
    assert s["ratio_wall"] == pytest.approx([0.9, 1.1, 1.0])
    assert s["ratio_wall_median"] == pytest.approx(1.0) and s["ratio_wall_best"] == pytest.approx(1.1)
    assert s["ratio_cpu"] == pytest.approx([0.5, 1.5, 1.0]) and s["ratio_cpu_median"] == pytest.approx(1.0)
    # the fastest runs: the plain loop's 0.9 s over the suite's 1.0 s
    assert s["ratio_wall_fastest"] == pytest.approx(0.9)
    assert as_run.row("driver", s)[:7] == ["driver", "1.0000", "1.0000", "1.000x",
                                           "0.900-1.100", "1.100x", "0.900x"]


def test_the_medians_interval_draws_whole_rounds_and_is_the_same_every_time():
    rounds = [0.95, 1.02, 0.99, 1.01, 0.97, 1.00, 0.98, 1.03, 0.96, 1.01, 0.99]
    low, high = as_run.median_interval(rounds)
    assert min(rounds) < low < statistics.median(rounds) < high < max(rounds)
    assert as_run.median_interval(rounds) == (low, high)
    # rounds that agree leave no doubt; one round leaves no interval
    assert as_run.median_interval([1.01] * 5) == pytest.approx((1.01, 1.01))
    assert all(math.isnan(v) for v in as_run.median_interval([1.0]))
