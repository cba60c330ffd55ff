"""get_power: samples, energy, files while running and at the end, and
robustness against failing devices and disks."""

import json
import math
import os
import sys
import threading

import pandas as pd
import pytest
from jpwr_fakes import FakeNvml

from jpwr import files as jpwr_files
from jpwr.aggregate import read_power_csv
from jpwr.ctxmgr import get_power
from jpwr.gpu.pynvml import NvmlPower
from jpwr.method import Channel, Method
from jpwr.sys.estimate import EstimatedPower
from jpwr.sys.hwmon import HwmonPower


def data_lines(path):
    return max(0, len(path.read_text().splitlines()) - 1)


def test_samples_are_flushed_while_running_and_completed_at_the_end(sysfs, tmp_path, wait,
                                                                   no_vendor_libraries):
    sysfs.hwmon(0, "psu", power1_input=200_000_000)
    out = tmp_path / "out"
    with get_power([HwmonPower()], 10, out_dir=out, suffix="_rank0", flush_s=0.05) as scope:
        power_file = out / "power_rank0.csv"
        wait(lambda: data_lines(power_file) >= 5, "flushed samples while running")
        meta = json.loads((out / "meta_rank0.json").read_text())
        assert meta["complete"] is False and meta["methods"] == ["hwmon"]
        assert not (out / "energy_rank0.csv").exists()
    samples = read_power_csv(power_file)
    meta = json.loads((out / "meta_rank0.json").read_text())
    assert len(samples) == len(scope.samples()) == meta["samples"]
    assert (samples.power_w == 200.0).all()
    energy = pd.read_csv(out / "energy_rank0.csv")
    row = energy.iloc[0]
    assert (row.method, row.device, row.source, bool(row.counted)) == (
        "hwmon", "psu/hwmon0/power1", "measured", True)
    assert row.energy_wh == pytest.approx(200 * row.duration_s / 3600)
    meta = json.loads((out / "meta_rank0.json").read_text())
    assert meta["complete"] is True and meta["interval_ms"] == 10.0 and meta["host"] == row.host


def test_estimated_channels_are_labelled_everywhere(proc_stat, tmp_path, wait):
    with get_power([EstimatedPower()], 10, out_dir=tmp_path) as scope:
        wait(lambda: len(scope.samples()) >= 3, "three samples")
    energy, additional = scope.channel_energy()
    assert set(scope.samples().source) == {"estimated"}
    assert list(energy.source) == ["estimated"] and additional == {}
    assert set(read_power_csv(tmp_path / "power.csv").source) == {"estimated"}
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["estimated_channels"] == ["estimate:cpus"]
    assert meta["method_settings"]["estimate"]["cpus"] == 4


class CountingNvml(FakeNvml):
    """Remembers every counter value it hands out."""

    def __init__(self, gpus):
        super().__init__(gpus)
        self.handed_out = []

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        self.gpus[handle]["energy_mj"] += 7_200
        self.handed_out.append(self.gpus[handle]["energy_mj"])
        return self.gpus[handle]["energy_mj"]


def test_hardware_counter_is_the_figure_and_the_integral_its_cross_check(install, tmp_path, wait):
    fake = CountingNvml([{"uuid": "GPU-1", "power_mw": 300_000, "energy_mj": 0}])
    install("pynvml", fake)
    with get_power([NvmlPower()], 10, out_dir=tmp_path, suffix="_x") as scope:
        wait(lambda: len(scope.samples()) >= 3, "three samples")
    energy, additional = scope.channel_energy()
    counter = additional["pynvml"].iloc[0]
    # Read once after the first sample and once after the last one.
    assert len(fake.handed_out) == 2
    assert counter.counter_wh == pytest.approx((fake.handed_out[1] - fake.handed_out[0]) / 3.6e6)
    row = energy.iloc[0]
    assert counter.integrated_wh == pytest.approx(row.integrated_wh)
    # 300 W held over the samples' span is the integral; the counter moved
    # by 7.2 J, so the counter's 0.002 Wh is the figure.
    assert row.integrated_wh == pytest.approx(300 * row.duration_s / 3600)
    assert (row.basis, row.energy_wh, row.counter_wh) == ("counter", pytest.approx(0.002),
                                                          pytest.approx(0.002))
    assert row.counter_vs_integrated_pct == pytest.approx(
        100 * (row.integrated_wh - 0.002) / 0.002)
    written = pd.read_csv(tmp_path / "additional_pynvml_x.csv")
    assert written.iloc[0].counter_wh == pytest.approx(counter.counter_wh)
    assert pd.read_csv(tmp_path / "energy_x.csv").iloc[0].basis == "counter"


def test_gh200_module_counter_never_becomes_the_gpu_figure(install, tmp_path, wait):
    fake = CountingNvml([{"uuid": "GPU-1", "name": "NVIDIA GH200 480GB", "power_mw": 300_000,
                          "energy_mj": 0}])
    install("pynvml", fake)
    with get_power([NvmlPower()], 10) as scope:
        wait(lambda: len(scope.samples()) >= 3, "three samples")
    energy, additional = scope.channel_energy()
    row = energy.iloc[0]
    assert (row.scope, row.basis) == ("gpu", "integrated")
    assert row.energy_wh == pytest.approx(row.integrated_wh)
    assert additional["pynvml"].iloc[0].counter_scope == "module"


def test_device_vanishing_mid_run_gives_nan_one_warning_and_no_crash(sysfs, tmp_path, wait,
                                                                     capfd, no_vendor_libraries):
    sysfs.hwmon(0, "psu", power1_input=100_000_000, power2_input=40_000_000)
    with get_power([HwmonPower()], 10, out_dir=tmp_path) as scope:
        wait(lambda: len(scope.samples()) >= 10, "samples before the loss")
        (sysfs.root / "class/hwmon/hwmon0/power2_input").unlink()
        lost_at = len(scope.samples()) // 2
        wait(lambda: len(scope.samples()) // 2 >= lost_at + 10, "samples after the loss")
    df = scope.samples()
    lost = df[df.device == "psu/hwmon0/power2"].power_w.to_numpy()
    assert not math.isnan(lost[0]) and math.isnan(lost[-1])
    assert not df[df.device == "psu/hwmon0/power1"].power_w.isna().any()
    assert capfd.readouterr().err.count("warning: hwmon psu/hwmon0/power2 did not answer") == 1
    energy = pd.read_csv(tmp_path / "energy.csv").set_index("device")
    assert energy.loc["psu/hwmon0/power2", "missing"] >= 10
    assert energy.loc["psu/hwmon0/power2", "energy_wh"] > 0


class Broken(Method):
    name = "hwmon"

    def __init__(self, fault):
        super().__init__()
        self.fault = fault
        self.channels = [Channel("a"), Channel("b")]

    def read(self):
        return self.fault()


@pytest.mark.parametrize("fault", [lambda: 1 / 0, lambda: [1.0]])
def test_a_method_that_misbehaves_gives_nan_not_a_dead_sampler(fault, wait, capfd):
    with get_power([Broken(fault)], 10) as scope:
        wait(lambda: len(scope.samples()) >= 6, "samples")
    assert scope.samples().power_w.isna().all()
    assert capfd.readouterr().err.count("warning") <= 1


def test_a_failing_disk_loses_no_samples(sysfs, tmp_path, wait, monkeypatch, capfd,
                                        no_vendor_libraries):
    sysfs.hwmon(0, "psu", power1_input=50_000_000)

    def disk_full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(jpwr_files.RunFiles, "append_power", disk_full)
    with get_power([HwmonPower()], 10, out_dir=tmp_path, flush_s=0.02) as scope:
        wait(lambda: len(scope.samples()) >= 10, "samples")
    err = capfd.readouterr().err
    assert err.count("cannot append samples to disk") == 1
    energy = pd.read_csv(tmp_path / "energy.csv")
    assert energy.iloc[0].samples == len(scope.samples())


def test_suffix_takes_the_rank_from_the_environment(proc_stat, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_RANK", "5")
    monkeypatch.setenv("RANK", "5")
    out = tmp_path / "out"
    with get_power([EstimatedPower()], 50, out_dir=out, suffix="_rank%q{MY_RANK}"):
        pass
    assert {p.name for p in out.iterdir()} == {"power_rank5.csv", "energy_rank5.csv",
                                              "meta_rank5.json"}
    assert json.loads((out / "meta_rank5.json").read_text())["rank"] == 5


@pytest.mark.parametrize("kwargs, message", [
    ({"interval_ms": 0}, "interval"),
    ({"interval_ms": -10}, "interval"),
    ({"interval_ms": "fast"}, "interval"),
    ({"filetype": "xlsx"}, "file type"),
    ({"suffix": "_%q{JPWR_TEST_UNSET}"}, "JPWR_TEST_UNSET is not set"),
    ({"flush_s": 0}, "flush"),
])
def test_bad_arguments_fail_before_anything_starts(proc_stat, tmp_path, kwargs, message):
    arguments = {"interval_ms": 100, "out_dir": tmp_path / "out"} | kwargs
    with pytest.raises(ValueError, match=message):
        get_power([EstimatedPower()], arguments.pop("interval_ms"), **arguments)


def test_unwritable_output_directory_is_refused(proc_stat, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="cannot write to"):
        get_power([EstimatedPower()], 100, out_dir=blocker / "out")


def test_methods_must_be_method_objects():
    with pytest.raises(ValueError, match="method objects"):
        get_power(["pynvml"], 100)


def test_h5_output(proc_stat, tmp_path, wait):
    pytest.importorskip("tables")
    with get_power([EstimatedPower()], 20, out_dir=tmp_path, filetype="h5", suffix="_r0") as scope:
        wait(lambda: len(scope.samples()) >= 3, "three samples")
    energy = pd.read_hdf(tmp_path / "energy_r0.h5", key="energy")
    power = pd.read_hdf(tmp_path / "power_r0.h5", key="power")
    assert list(energy.source) == ["estimated"] and len(power) >= 2
    assert (tmp_path / "power_r0.csv").exists()


def test_h5_without_tables_is_refused(proc_stat, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tables", None)
    with pytest.raises(ValueError, match="needs the Python package 'tables'"):
        get_power([EstimatedPower()], 100, out_dir=tmp_path, filetype="h5")


def test_failing_to_write_results_is_reported_not_raised(proc_stat, tmp_path, monkeypatch, capfd):
    def refuse(*args):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(jpwr_files.RunFiles, "write_table", refuse)
    with get_power([EstimatedPower()], 20, out_dir=tmp_path / "out"):
        pass
    err = capfd.readouterr().err
    assert "error: could not write the results" in err and "power.csv" in err
    assert data_lines(tmp_path / "out" / "power.csv") >= 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux only")
def test_sampler_runs_nicer_than_the_application(synthetic, wait):
    main_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    with get_power([synthetic(lambda t: 1.0)], 10) as scope:
        wait(lambda: len(scope.samples()) >= 1, "a sample")
        sampler = next(t for t in threading.enumerate() if t.name == "jpwr-sampler")
        assert os.getpriority(os.PRIO_PROCESS, sampler.native_id) == min(19, main_nice + 10)


def test_a_full_disk_at_the_close_is_reported_not_raised(synthetic, tmp_path, wait, capfd):
    """The power file's last flush and every result file fail, as on a file
    system that filled up during the run."""
    out = tmp_path / "out"
    scope = get_power([synthetic(lambda t: 20.0)], 10, out_dir=out, flush_s=0.01).start()
    wait(lambda: data_lines(out / "power.csv") >= 1, "a flushed sample")
    scope.files._power = open("/dev/full", "w")  # noqa: SIM115 - closed by the scope
    scope.files._power.write("x" * 10)  # buffered; only the close can fail now
    scope.files.dir = out / "power.csv"  # a file: nothing can be created below it
    scope.stop()
    err = capfd.readouterr().err
    assert "could not complete" in err and "could not write the results" in err
    assert scope.channel_energy()[0].iloc[0].energy_wh > 0


def test_a_folder_that_takes_no_new_file_at_the_end_still_gets_the_runs_end(synthetic, tmp_path,
                                                                             wait, capfd):
    """As in a folder made unwritable during the run: the results cannot be
    written, and the meta file's end and sample count go into the room its
    first version kept, so `jpwr combine` knows how many samples there were."""
    from jpwr.aggregate import FROM_COUNTED_SAMPLES, combine, summarize

    out = tmp_path / "out"
    scope = get_power([synthetic(lambda t: 20.0)], 10, out_dir=out, flush_s=0.01).start()
    wait(lambda: data_lines(out / "power.csv") >= 1, "a flushed sample")
    for name in ("meta.json", "energy.csv"):  # their temporary names are taken
        (out / f"{name}.partial").mkdir()
    scope.stop()
    assert "could not write the results" in capfd.readouterr().err
    meta = json.loads((out / "meta.json").read_text())
    assert meta["complete"] and meta["samples"] == len(scope.samples())
    table = combine([out])
    assert table.iloc[0]["origin"] == FROM_COUNTED_SAMPLES
    assert math.isfinite(summarize(table)["missing_pct"])
