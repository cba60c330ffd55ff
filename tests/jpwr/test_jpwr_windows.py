"""Named windows, the shortest runs, scopes that are never added, and
figures marked incomplete: what a result row needs to say what its energy
figure covers."""

import json
import time

import numpy as np
import pandas as pd
import pytest
from jpwr_fakes import FakeAmdSmi, FakeNvml

from jpwr import sampler
from jpwr.aggregate import combine, combine_windows, scope_lines, summarize, window_lines
from jpwr.cli import main
from jpwr.ctxmgr import get_power
from jpwr.energy import energy_table
from jpwr.gpu.pynvml import NvmlPower
from jpwr.gpu.rocm import RocmPower
from jpwr.sys.estimate import EstimatedPower
from jpwr.sys.rapl import RaplPower


def ramp(t0):
    """10 W at t0, rising 100 W per second: the analytic energy of a window is known."""
    return lambda t: 10.0 + 100.0 * (t - t0)


def ramp_joules(t0, begin, end):
    return 10.0 * (end - begin) + 50.0 * ((end - t0) ** 2 - (begin - t0) ** 2)


def test_a_window_gets_the_energy_between_its_edges(synthetic, wait, tmp_path):
    t0 = time.time()
    with get_power([synthetic(ramp(t0))], 10, out_dir=tmp_path, suffix="_rank0") as scope:
        wait(lambda: len(scope.samples()) >= 5, "samples before the window")
        scope.begin_window("timed")
        wait(lambda: len(scope.samples()) >= 25, "samples inside the window")
        scope.end_window("timed")
        wait(lambda: len(scope.samples()) >= 30, "samples after the window")
    row = scope.windows().iloc[0]
    # A linear ramp is integrated exactly by the trapezoid rule with
    # interpolated edges; only the timestamps' spacing from the reads remains.
    expected = ramp_joules(t0, row.t_start, row.t_end) / 3600
    assert row.energy_wh == pytest.approx(expected, rel=0.02)
    assert (row.window, row.basis, row.scope) == ("timed", "integrated", "hwmon-sensor")
    assert row.samples >= 2
    whole = scope.channel_energy()[0].iloc[0]
    assert row.energy_wh < whole.energy_wh
    written = pd.read_csv(tmp_path / "windows_rank0.csv")
    assert list(written.window) == ["timed"]


def test_a_window_shorter_than_the_interval_is_interpolated_with_a_warning(synthetic, wait, capfd):
    t0 = time.time()
    with get_power([synthetic(ramp(t0))], 200) as scope:
        wait(lambda: len(scope.samples()) >= 1, "a first sample")
        scope.begin_window("blink")
        scope.end_window("blink")
        wait(lambda: len(scope.samples()) >= 2, "a sample after the window")
    row = scope.windows().iloc[0]
    assert row.basis == "interpolated" and row.samples == 0
    assert row.energy_wh > 0
    assert row.energy_wh == pytest.approx(ramp_joules(t0, row.t_start, row.t_end) / 3600, rel=0.05)
    assert "window 'blink'" in capfd.readouterr().err


def test_a_window_takes_the_hardware_counter_where_there_is_one(install, wait):
    gpus = [{"uuid": "GPU-1", "power_mw": 100_000, "energy_mj": 0}]
    install("pynvml", FakeNvml(gpus))
    with get_power([NvmlPower()], 10) as scope:
        wait(lambda: len(scope.samples()) >= 2, "samples")
        scope.begin_window("timed")
        gpus[0]["energy_mj"] += 36_000  # the counter moves by 36 J = 0.01 Wh
        scope.end_window("timed")
    row = scope.windows().iloc[0]
    assert (row.basis, row.energy_wh) == ("counter", pytest.approx(0.01))
    assert row.integrated_wh < 0.01  # 100 W over a few microseconds


def test_rapl_counter_is_read_live_for_a_window(sysfs, wait, no_vendor_libraries):
    zone = sysfs.rapl_zone("intel-rapl:0", "package-0", 1_000_000)
    with get_power([RaplPower()], 50) as scope:
        wait(lambda: len(scope.samples()) >= 2, "samples")
        scope.begin_window("timed")
        zone.write_text("4600000\n")  # 3.6 J = 0.001 Wh
        scope.end_window("timed")
    row = scope.windows().iloc[0]
    assert (row.basis, row.energy_wh) == ("counter", pytest.approx(0.001))


def test_a_command_shorter_than_the_priming_delay_still_gets_energy(sysfs, no_vendor_libraries,
                                                                   tmp_path, capsys):
    sysfs.hwmon(0, "psu", power1_input=50_000_000)  # 50 W
    out = tmp_path / "out"
    assert main(["--methods", "hwmon", "--interval", "100", "--df-out", str(out), "true"]) == 0
    [energy] = out.glob("energy*.csv")
    row = pd.read_csv(energy).iloc[0]
    assert row.energy_wh > 0 and row.mean_w == pytest.approx(50.0)
    assert "jpwr: total" in capsys.readouterr().err


def test_windows_of_all_ranks_combine_into_one_line_each(synthetic, wait, tmp_path):
    for rank in (0, 1):
        with get_power([synthetic(lambda t: 36.0, devices=(f"s{rank}",))], 10,
                       out_dir=tmp_path, suffix=f"_rank{rank}") as scope:
            scope.begin_window("timed")
            wait(lambda: len(scope.samples()) >= 4, "samples")
            scope.end_window("timed")
    windows = combine_windows([tmp_path])
    assert len(windows) == 2
    (line,) = window_lines(windows)
    fields = dict(f.split("=") for f in line.split()[1:])
    assert (fields["window"], fields["counted"], fields["devices"]) == ("timed", "yes", "2")
    expected = windows["duration_s"].sum() * 36 / 3600
    assert float(fields["total_wh"]) == pytest.approx(expected, rel=1e-3)
    assert fields["scope"] == "hwmon-sensor"


def test_a_window_gets_one_line_per_scope(tmp_path):
    pd.DataFrame([{"window": "timed", "host": "gh1", "rank": 0, "method": m, "device": d,
                   "source": "measured", "scope": scope, "counted": True, "energy_wh": wh,
                   "basis": "integrated", "integrated_wh": wh, "counter_wh": np.nan,
                   "duration_s": 10.0, "samples": 100, "t_start": 0.0, "t_end": 10.0}
                  for m, d, scope, wh in (("pynvml", "gpu0", "gpu", 1.0),
                                          ("gh", "module-0", "module", 3.0))]
                 ).to_csv(tmp_path / "windows_rank0.csv", index=False)
    (tmp_path / "meta_rank0.json").write_text(json.dumps({"host": "gh1", "rank": 0}))
    lines = window_lines(combine_windows([tmp_path]))
    assert [line.split()[2:5] for line in lines] == [
        ["scope=gpu", "counted=yes", "total_wh=1.0"], ["scope=module", "counted=no", "total_wh=3.0"]]


def energy_file(directory, rank, host, rows):
    directory.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame([{"host": host, "rank": rank, "method": m, "device": d,
                           "source": "measured", "counted": True, "energy_wh": wh,
                           "mean_w": wh * 36, "max_w": 1.0, "duration_s": 100.0,
                           "samples": samples, "missing": missing, "t_start": 0.0,
                           "t_end": 100.0} for m, d, wh, samples, missing in rows])
    table.to_csv(directory / f"energy_rank{rank}.csv", index=False)
    (directory / f"meta_rank{rank}.json").write_text(json.dumps({"host": host, "rank": rank}))


def test_each_scope_gets_its_own_total_and_scopes_are_never_added(tmp_path):
    energy_file(tmp_path, 0, "gh1", [("pynvml", "gpu0", 2.0, 100, 0),
                                    ("gh", "module-0", 5.0, 100, 0),
                                    ("gh", "grace-0", 1.0, 100, 0)])
    table = combine([tmp_path])
    summary = summarize(table)
    assert (summary["total_wh"], summary["scope"]) == (2.0, "gpu")
    *per_scope, together = scope_lines(table)
    lines = {line.split()[1]: line for line in per_scope}
    assert set(lines) == {"scope=gpu", "scope=module", "scope=grace"}
    assert "total_wh=5.0 " in lines["scope=module"]
    assert together == "jpwr-scopes: gpu=2.0 module=5.0 grace=1.0"


def test_too_many_missing_samples_mark_the_figure_incomplete(tmp_path):
    energy_file(tmp_path, 0, "n1", [("hwmon", "psu/hwmon0/power1", 0.0247, 10, 79)])
    summary = summarize(combine([tmp_path]))
    assert summary["source"] == "incomplete"
    assert summary["missing_pct"] == pytest.approx(100 * 79 / 89)
    energy_file(tmp_path, 0, "n1", [("hwmon", "psu/hwmon0/power1", 0.0247, 99, 1)])
    assert summarize(combine([tmp_path]))["source"] == "measured"


def test_integral_and_counter_differences_reach_the_summary(tmp_path):
    energy_file(tmp_path, 0, "n1", [("pynvml", "gpu0", 1.0, 100, 0)])
    table = pd.read_csv(tmp_path / "energy_rank0.csv")
    table["basis"], table["counter_wh"], table["integrated_wh"] = "counter", 1.0, 1.017
    table["scope"], table["counter_vs_integrated_pct"] = "gpu", 1.7
    table.to_csv(tmp_path / "energy_rank0.csv", index=False)
    summary = summarize(combine([tmp_path]))
    assert summary["basis"] == "counter"
    assert summary["counter_vs_integrated_pct"] == pytest.approx(1.7)
    assert np.isfinite(summary["total_wh"])


def test_a_channel_that_never_answers_is_left_out_not_marked_incomplete(tmp_path):
    """MI250: amdsmi reports the card's power on the first GCD, none on the second."""
    energy_file(tmp_path, 0, "mi250", [("rocm", "gpu0", 1.0, 100, 0),
                                      ("rocm", "gpu1", float("nan"), 0, 100)])
    summary = summarize(combine([tmp_path]))
    assert (summary["source"], summary["devices"], summary["missing_pct"]) == ("measured", 1, 0.0)


def test_amdsmi_accumulator_is_the_figure_of_a_run(install, wait):
    gpu = {"uuid": "GPU-A", "power_info": {"socket_power": 500},
           "energy_count": {"energy_accumulator": 0, "counter_resolution": 15.3}}
    install("amdsmi", FakeAmdSmi([gpu]))
    with get_power([RocmPower()], 10) as scope:
        wait(lambda: len(scope.samples()) >= 2, "samples")
        # 235,294 ticks of 15.3 uJ = 3.6 J = 0.001 Wh
        gpu["energy_count"] = {"energy_accumulator": 235_294, "counter_resolution": 15.3}
        wait(lambda: len(scope.samples()) >= 4, "samples after the counter moved")
    row = scope.channel_energy()[0].iloc[0]
    assert (row.scope, row.basis) == ("gpu", "counter")
    assert row.energy_wh == pytest.approx(235_294 * 15.3e-6 / 3600)
    assert row.integrated_wh == pytest.approx(500 * row.duration_s / 3600)


def test_rapl_counter_is_the_figure_of_a_run(sysfs, wait, no_vendor_libraries):
    zone = sysfs.rapl_zone("intel-rapl:0", "package-0", 1_000_000)
    with get_power([RaplPower()], 10) as scope:
        wait(lambda: len(scope.samples()) >= 2, "samples")
        zone.write_text("8200000\n")  # 7.2 J = 0.002 Wh
        wait(lambda: len(scope.samples()) >= 4, "samples after the counter moved")
    row = scope.channel_energy()[0].iloc[0]
    assert (row.scope, row.basis, row.energy_wh) == ("cpu-socket+dram", "counter",
                                                     pytest.approx(0.002))


@pytest.fixture
def sampler_first_runs_at_the_stop(monkeypatch):
    """A sampler thread that first runs when the measured code has ended, as
    on a busy node, where it runs at a lower priority than the training.
    Returns a function that measures a run under it."""
    def measure(method, run):
        scope = get_power([method], 10)
        # the thread's first step waits for the stop (with a deadline)
        monkeypatch.setattr(sampler, "_yield_to_the_application",
                            lambda: scope._sampler._stop.wait(timeout=60))
        with scope:
            run()
        return scope.channel_energy()[0].iloc[0], scope.end_time - scope.start_time
    return measure


def test_a_run_the_sampler_never_saw_gets_its_estimate_from_the_start(proc_stat,
                                                                       sampler_first_runs_at_the_stop):
    # the run: 300 busy and 100 idle ticks, 75 % utilisation of 4 CPUs
    row, span = sampler_first_runs_at_the_stop(EstimatedPower(), lambda: proc_stat.advance(300, 100))
    watts = 4 * 3.0 * (0.3 + 0.7 * 0.75)
    assert row.energy_wh == pytest.approx(watts * span / 3600)
    assert (row.duration_s, row.mean_w) == (pytest.approx(span), pytest.approx(watts))


def test_a_run_the_sampler_never_saw_gets_its_counter_from_the_start(sysfs, no_vendor_libraries,
                                                                      sampler_first_runs_at_the_stop):
    zone = sysfs.rapl_zone("intel-rapl:0", "package-0", 1_000_000)
    row, _ = sampler_first_runs_at_the_stop(RaplPower(), lambda: zone.write_text("8200000\n"))
    assert (row.basis, row.energy_wh) == ("counter", pytest.approx(0.002))  # 7.2 J


def test_a_run_is_held_at_its_first_and_last_samples_to_its_edges():
    power = pd.DataFrame({"time": [10.1, 10.5], "method": "hwmon", "device": "s",
                          "source": "measured", "power_w": [40.0, 60.0]})
    row = energy_table(power, span=(10.0, 10.6)).iloc[0]
    assert row.energy_wh == pytest.approx((40.0 * 0.1 + 50.0 * 0.4 + 60.0 * 0.1) / 3600)
    assert (row.basis, row.t_start, row.t_end, row.duration_s) == (
        "integrated", 10.0, 10.6, pytest.approx(0.6))


def test_a_run_is_not_held_across_a_gap_at_its_edge():
    power = pd.DataFrame({"time": [10.1, 10.3, 10.5], "method": "hwmon", "device": "s",
                          "source": "measured", "power_w": [np.nan, 40.0, 60.0]})
    row = energy_table(power, span=(10.0, 10.5)).iloc[0]
    assert row.energy_wh == pytest.approx(50.0 * 0.2 / 3600)


def test_a_run_with_one_answered_sample_holds_it_over_the_run_and_says_so():
    power = pd.DataFrame({"time": [10.0, 10.05], "method": "hwmon", "device": "s",
                          "source": "measured", "power_w": [np.nan, 40.0]})
    row = energy_table(power, span=(10.0, 10.09)).iloc[0]
    assert row.basis == "interpolated"
    assert row.energy_wh == pytest.approx(40.0 * 0.09 / 3600)
    assert (row.t_start, row.t_end) == (10.0, 10.09)
