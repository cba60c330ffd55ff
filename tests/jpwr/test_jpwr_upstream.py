"""Scripts written for upstream jpwr keep working: the client below follows
the CARAML image benchmark's use of it (a list of methods, `with
get_power(methods, 100) as scope`, columns added to `scope.df`, `energy()`
and its additional tables written to CSV), and a script in the style of
upstream's own tests runs as a process of its own."""

import json
import math
import os
import platform
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
from jpwr_fakes import FakeNvml

from jpwr.ctxmgr import get_power
from jpwr.method import Channel, Method
from jpwr.sys.hwmon import HwmonPower


def upstream_client(methods, out_dir, rankid, wait):
    """An upstream-style script, as CARAML writes it."""
    power_methods = []
    for m in methods:
        if m == "pynvml":
            from jpwr.gpu.pynvml import power
            power_methods.append(power())
    with get_power(power_methods, 100) as measured_scope:
        wait(lambda: len(measured_scope.samples()) >= 6, "three samples of two GPUs")  # "training"
    energy_df, additional_data = measured_scope.energy()
    nodename = platform.node()
    power_file = out_dir / f"{nodename}_rank{rankid}.csv"
    measured_scope.df["nodename"] = nodename
    measured_scope.df["rank"] = rankid
    measured_scope.df.to_csv(power_file)
    energy_df["nodename"] = nodename
    energy_df["rank"] = rankid
    energy_file = out_dir / f"{nodename}_rank{rankid}_energy.csv"
    energy_df.to_csv(energy_file)
    for k, v in additional_data.items():
        v.T.to_csv(out_dir / f"{nodename}_rank{rankid}{k}.csv")
    return measured_scope, power_file, energy_file


class StepCounterNvml(FakeNvml):
    """Each counter read adds 3.6 J (1 mWh) to GPU 0 and 7.2 J to GPU 1."""

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        self.gpus[handle]["energy_mj"] += 3_600 * (handle + 1)
        return self.gpus[handle]["energy_mj"]


def test_an_upstream_client_gets_upstream_shapes_without_warnings_of_jpwr(install, tmp_path, wait):
    install("pynvml", StepCounterNvml([{"uuid": "GPU-a", "power_mw": 300_000, "energy_mj": 0},
                                       {"uuid": "GPU-b", "power_mw": 150_000, "energy_mj": 0}]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # pandas' own, as with upstream jpwr's float Series: a text label
        # (energy["nodename"] = host) turns it into an object Series
        warnings.filterwarnings("ignore", message="Setting an item of incompatible dtype")
        scope, power_file, energy_file = upstream_client(["pynvml"], tmp_path, 0, wait)
    node = platform.node()

    # scope.df: timestamps and one column per device; the caller's columns stay
    assert list(scope.df.columns) == ["timestamps", "pynvml:0", "pynvml:1", "nodename", "rank"]
    assert (scope.df["nodename"] == node).all() and (scope.df["rank"] == 0).all()
    power = pd.read_csv(power_file, index_col=0)
    assert list(power.columns) == ["timestamps", "pynvml:0", "pynvml:1", "nodename", "rank"]
    assert len(power) >= 3 and (power["pynvml:0"] == 300.0).all() and (power["pynvml:1"] == 150.0).all()
    assert power["timestamps"].is_monotonic_increasing

    # energy(): a Series of integrated Wh per device, over the measurement
    # from its start to its stop; upstream's energy CSV is one row per
    # device with the value beside it
    span = scope.end_time - scope.start_time
    energy = pd.read_csv(energy_file, index_col=0).iloc[:, 0]
    assert list(energy.index) == ["pynvml:0", "pynvml:1", "nodename", "rank"]
    assert float(energy["pynvml:0"]) == pytest.approx(300 * span / 3600)
    assert float(energy["pynvml:1"]) == pytest.approx(150 * span / 3600)
    assert energy["nodename"] == node

    # additional_data["energy_from_counter"], transposed by the client: one
    # row of counter Wh per device
    counter = pd.read_csv(tmp_path / f"{node}_rank0energy_from_counter.csv", index_col=0).iloc[:, 0]
    assert counter.to_dict() == {"pynvml:0": pytest.approx(0.001), "pynvml:1": pytest.approx(0.002)}


def test_energy_is_a_series_and_df_an_attribute_before_any_change(install, tmp_path, wait):
    install("pynvml", StepCounterNvml([{"uuid": "GPU-a", "power_mw": 100_000, "energy_mj": 0}]))
    from jpwr.gpu.pynvml import power

    scope = get_power([power()], 10)
    assert list(scope.df.columns) == ["timestamps", "pynvml:0"] and scope.df.empty
    with scope:
        wait(lambda: len(scope.samples()) >= 3, "samples")
    assert "df" in vars(scope)  # a plain attribute, so assignments persist
    energy, additional = scope.energy()
    assert isinstance(energy, pd.Series) and list(energy.index) == ["pynvml:0"]
    # numbers, as upstream's: describe() gives mean and std, not counts of values
    assert energy.dtype == "float64"
    assert energy.describe()["mean"] == pytest.approx(energy["pynvml:0"])
    assert set(additional) == {"energy_from_counter"}
    assert list(additional["energy_from_counter"].columns) == ["pynvml:0"]
    # the suite's own tables are unchanged under their names
    assert list(scope.samples().columns) == ["time", "method", "device", "source", "power_w"]
    assert scope.channel_energy()[0].iloc[0].basis == "counter"


def test_options_are_upstreams_and_a_method_without_counter_has_no_additional(sysfs, wait,
                                                                              no_vendor_libraries):
    sysfs.hwmon(0, "psu", power1_input=50_000_000)
    with get_power([HwmonPower()], 10, {"ignore_measure_errors": True}) as scope:
        wait(lambda: len(scope.samples()) >= 3, "samples")
    energy, additional = scope.energy()
    assert list(energy.index) == ["hwmon:psu/hwmon0/power1"] and additional == {}
    assert energy.iloc[0] > 0
    with pytest.raises(ValueError, match="unknown get_power option.*'ignore_errors'"):
        get_power([HwmonPower()], 10, {"ignore_errors": True})


class AlwaysSucceed:
    """A method object as upstream jpwr's own tests write one: init adds a
    list per device, measure appends to each, finalize returns extra tables."""

    def init(self, power_value_dict):
        power_value_dict.update({f"always_succeed:{i}": [] for i in range(4)})

    def measure(self, power_value_dict):
        for i in range(4):
            power_value_dict[f"always_succeed:{i}"].append(10.0 * (i + 1))

    def finalize(self, power_value_dict):
        samples = len(power_value_dict["always_succeed:0"])
        return {"energy_from_counter": pd.DataFrame({f"always_succeed:{i}": [float(samples)]
                                                     for i in range(4)})}


class AlwaysFail:
    def init(self, power_value_dict):
        power_value_dict.update({f"always_fail:{i}": [] for i in range(4)})

    def measure(self, power_value_dict):
        power_value_dict["always_fail:0"].append(1.0)  # half a sample, then the error
        raise RuntimeError("device gone")

    def finalize(self, power_value_dict):
        assert power_value_dict["always_fail:0"] == []  # the half samples were cut back
        return {}


def test_upstream_style_method_objects_run_and_a_failing_one_gives_nan(wait, capfd):
    with get_power([AlwaysSucceed(), AlwaysFail()], 10, {"ignore_measure_errors": True}) as scope:
        wait(lambda: len(scope.samples()) >= 3 * 8, "three samples of eight devices")
    succeed = [f"always_succeed:{i}" for i in range(4)]
    fail = [f"always_fail:{i}" for i in range(4)]
    assert list(scope.df.columns) == ["timestamps", *succeed, *fail]
    assert (scope.df[succeed].to_numpy() == [10.0, 20.0, 30.0, 40.0]).all()
    assert scope.df[fail].isna().all().all()
    energy, additional = scope.energy()
    assert list(energy.index) == succeed + fail
    span = scope.end_time - scope.start_time
    assert float(energy["always_succeed:1"]) == pytest.approx(20.0 * span / 3600)
    assert energy[fail].isna().all()  # never answered: no figure, not 0 Wh
    # finalize saw every sample the sampler took
    counted = additional["energy_from_counter"].iloc[0]
    assert list(counted.index) == succeed and (counted == len(scope.df)).all()
    err = capfd.readouterr().err
    assert len([line for line in err.splitlines() if "device gone" in line]) == 1
    assert "finalize failed" not in err


def test_an_upstream_method_that_adds_no_device_is_refused():
    class Empty(AlwaysSucceed):
        def init(self, power_value_dict):
            pass

    with pytest.raises(ValueError, match="Empty.init added no device"):
        get_power([Empty()], 100)


class TwoPrefixes:
    def init(self, power_value_dict):
        power_value_dict.update({"a:0": [], "b:0": []})

    def measure(self, power_value_dict):
        power_value_dict["a:0"].append(5.0)
        power_value_dict["b:0"].append(7.0)

    def finalize(self, power_value_dict):
        return {}


class HalfCounted(Method):
    """Two channels, a hardware counter on the first only."""

    name = "half"

    def __init__(self):
        super().__init__()
        self.channels = [Channel("gpu0"), Channel("gpu1")]
        self.reads = 0

    def read(self):
        return [100.0, 100.0]

    def energy_j(self):
        self.reads += 1
        return [3600.0 * self.reads, math.nan]


def test_columns_stay_apart_and_only_real_counters_are_reported(wait):
    with get_power([TwoPrefixes(), HalfCounted()], 10) as scope:
        wait(lambda: len(scope.samples()) >= 3 * 4, "samples")
    assert list(scope.df.columns) == ["timestamps", "a:0", "b:0", "half:0", "half:1"]
    energy, additional = scope.energy()
    assert float(energy["a:0"]) * 7 == pytest.approx(float(energy["b:0"]) * 5)
    counter = additional["energy_from_counter"]
    assert list(counter.columns) == ["half:0"] and counter.iloc[0, 0] == pytest.approx(1.0)


# A script in the style of upstream jpwr's own tests (test/test_pynvml.py):
# a main() measured with `with get_power([power()], 100) as measured_scope`,
# then the power table, energy() and the counter's energy printed.
UPSTREAM_STYLE_SCRIPT = """
import time

from jpwr.ctxmgr import get_power
from jpwr.gpu.pynvml import power


def main():
    time.sleep(0.5)


if __name__ == "__main__":
    with get_power([power()], 100) as measured_scope:
        print("Measuring Energy during main() call")
        main()
    print(measured_scope.df)
    energy_int, energy_cnt = measured_scope.energy()
    print(f"integrated: {energy_int}")
    print(f"from counter: {energy_cnt}")
    print("described:", " ".join(energy_int.describe().index))
"""


def test_an_upstream_style_script_runs_unchanged_and_gets_float_energy(tmp_path):
    root = Path(__file__).resolve().parents[2]
    state = tmp_path / "nvml.json"
    state.write_text(json.dumps({"gpus": [{"uuid": "GPU-a", "power_mw": 0, "energy_mj": 0,
                                           "limit_mw": 300_000, "limit_range_mw": [100_000, 400_000]}]}))
    script = tmp_path / "test_pynvml_style.py"
    script.write_text(UPSTREAM_STYLE_SCRIPT)
    env = {**os.environ, "CARAML_FAKE_NVML_STATE": str(state),  # the GPU draws 60 % of 300 W
           "PYTHONPATH": os.pathsep.join([str(root / "tests" / "fake_bindings"), str(root)])}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Warning" not in done.stderr, done.stderr
    assert "integrated: pynvml:0 " in done.stdout and "dtype: float64" in done.stdout, done.stdout
    assert re.search(r"from counter: \{'energy_from_counter':\s+pynvml:0", done.stdout)
    # numbers: describe() gives mean and std (an object Series gives counts of values)
    assert done.stdout.strip().splitlines()[-1] == "described: count mean std min 25% 50% 75% max"
