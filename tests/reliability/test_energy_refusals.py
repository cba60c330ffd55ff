"""An energy figure no device can give is never a measured one: a counter
that went backwards (a driver reload, a meter restart) or stood still while
power was drawn, samples whose clock stepped, sensors that read 0 W. Each
source is measured through jpwr's own method over a fake device layer (fake
NVML and amdsmi bindings, fake sysfs trees), combined by `jpwr combine` and
decided by the row model: the figure is the integral where that is whole,
else none, and the row says which channel was refused and why."""

from __future__ import annotations

import json
import sys
import threading
import time

import numpy as np
import pandas as pd
import pytest

from jpwr import aggregate, cli
from jpwr.ctxmgr import get_power
from jpwr.energy import energy_table
from tests.jpwr.jpwr_fakes import FakeAmdSmi, FakeNvml, FakeSysfs, fake_sysfs, without_vendor_libraries
from tests.pm_counters_files import PmCounterFolder

WATTS = 300.0
RUN_S = 0.4
# why a figure was refused, as the row's flags say it (jpwr/energy.py REFUSALS)
BACKWARDS, STOOD_STILL = "counter-went-backwards", "counter-stood-still"
CLOCK_STEPPED, NEGATIVE = "clock-stepped-back", "negative-power"


@pytest.fixture
def binding(monkeypatch):
    """binding(name, module): the vendor binding jpwr imports, and no other."""
    without_vendor_libraries(monkeypatch)
    return lambda name, module: monkeypatch.setitem(sys.modules, name, module)


@pytest.fixture
def sysfs(tmp_path, monkeypatch) -> FakeSysfs:
    return fake_sysfs(tmp_path, monkeypatch)


def measure(method, out, during=lambda: None, run_s: float = RUN_S) -> None:
    """A run of `run_s` seconds measured with `method` into `out`; `during`
    changes the device halfway."""
    with get_power([method], 10, out_dir=out, suffix="_rank0") as scope:
        time.sleep(run_s / 2)
        during()
        time.sleep(run_s / 2)
    assert scope.end_time - scope.start_time >= run_s


def combined(out, capsys) -> str:
    """`jpwr combine OUT`'s standard output (its exit status 0)."""
    capsys.readouterr()
    assert cli.main(["combine", str(out)]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def line(text: str, prefix: str) -> dict[str, str]:
    found = [ln for ln in text.splitlines() if ln.startswith(prefix)]
    assert len(found) == 1, text
    return dict(item.split("=", 1) for item in found[0].split()[1:])


def row_of(jpwr_stdout: str):
    """The row the row model decides from these jpwr lines, for a run long
    enough to be a measurement."""
    from caraml.row.facts import Facts, energy, energy_flags
    from caraml.row.record import make
    from caraml.row.verdict import judged
    fields = energy(jpwr_stdout, Facts(scope_asked="counted", work_total=1000.0, work_timed=None))
    row = judged(make({"state": "ok", "timed_iterations": 20, "timed_s": 60.0, **fields}))
    return row, energy_flags(fields)


def assert_the_integral_stands(text: str, why: str, device: str) -> None:
    """The figure is the channel's integrated power, whole and positive, and
    the row names the counter it refused."""
    summary = line(text, "jpwr-summary:")
    seconds = float(summary["duration_s"])
    assert summary["basis"] == "integrated" and summary["complete"] == "yes", summary
    assert float(summary["total_wh"]) == pytest.approx(WATTS * seconds / 3600, rel=0.05), summary
    assert float(summary["mean_w_per_device"]) == pytest.approx(WATTS, rel=0.05)
    refused = line(text, "jpwr-refused:")
    assert refused["device"] == device and refused["why"] == why and refused["figure"] == "integrated"
    row, flags = row_of(text)
    assert row.measurement and row.wh_run > 0
    assert any(f.startswith("energy-refused(") and why in f and "integrated" in f for f in flags), flags


@pytest.mark.parametrize("after_mj", [5_000, 1_000_000], ids=["restarted", "stood-still"])
def test_an_nvml_counter_that_restarts_or_stands_still_gives_the_integral(tmp_path, capsys, binding,
                                                                            after_mj):
    gpu = {"uuid": "GPU-aaaa", "power_mw": int(WATTS * 1000), "energy_mj": 1_000_000}
    binding("pynvml", FakeNvml([gpu]))
    from jpwr.gpu.pynvml import NvmlPower
    measure(NvmlPower(), tmp_path, during=lambda: gpu.update(energy_mj=after_mj))
    why = BACKWARDS if after_mj < 1_000_000 else STOOD_STILL
    assert_the_integral_stands(combined(tmp_path, capsys), why, "gpu0")


def test_an_amdsmi_counter_that_restarts_gives_the_integral(tmp_path, capsys, binding):
    gpu = {"uuid": "a", "power_info": {"socket_power": WATTS},
           "energy_count": {"energy_accumulator": 10**9, "counter_resolution": 15.3}}
    binding("amdsmi", FakeAmdSmi([gpu]))
    from jpwr.gpu.rocm import RocmPower
    measure(RocmPower(), tmp_path,
            during=lambda: gpu.update(energy_count={"energy_accumulator": 10, "counter_resolution": 15.3}))
    assert_the_integral_stands(combined(tmp_path, capsys), BACKWARDS, "gpu0")


def test_a_pm_counters_node_counter_that_steps_back_gives_the_integral(tmp_path, capsys, sysfs):
    folder: PmCounterFolder = sysfs.pm_counters()
    folder.write({"": 5_000_000}, {"": int(WATTS)}, timestamp_us=1)
    from jpwr.sys.pm_counters import PmCountersPower
    measure(PmCountersPower(), tmp_path / "out",
            during=lambda: folder.write({"": 4_999_995}, {"": int(WATTS)}, timestamp_us=2))
    assert_the_integral_stands(combined(tmp_path / "out", capsys), BACKWARDS, "node")


def test_a_pm_counters_counter_and_power_that_stand_still_at_0_give_no_figure(tmp_path, capsys, sysfs):
    """The controller keeps updating, but the node's files read the same
    counter and 0 W: nothing says what the node drew."""
    folder = sysfs.pm_counters()
    folder.write({"": 5_000_000}, {"": 0}, timestamp_us=1)
    from jpwr.sys.pm_counters import PmCountersPower
    measure(PmCountersPower(), tmp_path / "out",
            during=lambda: folder.write({"": 5_000_000}, {"": 0}, timestamp_us=2))
    capsys.readouterr()
    assert cli.main(["combine", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "no channel that counts into the total has any energy data" in err
    assert "read 0 W throughout" in err and "energy counter stood still" in err, err


class RaplCounter:
    """A RAPL zone's energy_uj rising at WATTS, written by a thread (as the
    CPU's counter rises on its own); reset() sets it back near 0."""

    def __init__(self, sysfs: FakeSysfs) -> None:
        self.path = sysfs.rapl_zone("intel-rapl:0", "package-0", 100_000_000_000)
        self.base, self.since = 100_000_000_000, time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _write(self) -> None:
        FakeSysfs.write(self.path, int(self.base + WATTS * 1e6 * (time.monotonic() - self.since)))

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self._write()

    def reset(self) -> None:
        self.base, self.since = 1_000, time.monotonic()
        self._write()

    def __enter__(self) -> RaplCounter:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def test_a_rapl_counter_that_is_reset_is_no_wrap(tmp_path, capsys, sysfs):
    """A RAPL counter set back near 0 mid-run was reset: read as a wrap it
    would add its whole range (262 kJ, 72 Wh) within one sample."""
    from jpwr.sys.rapl import RaplPower
    with RaplCounter(sysfs) as counter:
        measure(RaplPower(), tmp_path / "out", during=counter.reset)
    text = combined(tmp_path / "out", capsys)
    summary = line(text, "jpwr-summary:")
    seconds = float(summary["duration_s"])
    # the interval of the reset has no power: the rest is integrated, and the figure is not whole
    assert 0 < float(summary["total_wh"]) <= 1.05 * WATTS * seconds / 3600, summary
    assert summary["basis"] == "integrated" and summary["complete"] == "no", summary
    refused = line(text, "jpwr-refused:")
    assert (refused["device"], refused["why"]) == ("package-0", BACKWARDS), refused
    row, _ = row_of(text)
    assert not row.measurement and row.work_per_wh is None


def test_power_samples_whose_clock_steps_back_an_hour_have_no_figure(tmp_path, capsys):
    """Samples of 19 s whose clock stepped back an hour in the middle:
    sorted by time they would span an hour and count 19 s of power as 3,600 s."""
    start = 1_800_000_000.0
    times = [*(start + t for t in range(10)), *(start - 3600 + 10 + t for t in range(10))]
    samples = "".join(f"{t},pynvml,gpu{i},measured,{WATTS}\n" for t in times for i in (0, 1)
                      if i == 0 or t >= start)
    (tmp_path / "power_rank0.csv").write_text("time,method,device,source,power_w\n" + samples)
    (tmp_path / "meta_rank0.json").write_text(json.dumps({"host": "n1", "rank": 0}))
    text = combined(tmp_path, capsys)
    summary = line(text, "jpwr-summary:")
    assert float(summary["duration_s"]) < 60 and summary["complete"] == "no", summary
    refused = line(text, "jpwr-refused:")
    assert (refused["device"], refused["why"], refused["figure"]) == ("gpu0", CLOCK_STEPPED, "none")
    row, flags = row_of(text)
    assert not row.measurement and f"energy-refused(n1/pynvml/gpu0:{CLOCK_STEPPED}:none)" in flags


def test_a_wall_clock_step_during_a_run_moves_nothing(tmp_path, capsys, sysfs, monkeypatch):
    """The wall clock steps an hour ahead while jpwr measures (NTP, an
    operator's `date`): the run's edges and its samples keep one clock."""
    sysfs.hwmon(0, "psu", power1_input=int(WATTS * 1e6))
    from jpwr.sys.hwmon import HwmonPower
    wall = time.time
    measure(HwmonPower(), tmp_path / "out",
            during=lambda: monkeypatch.setattr(time, "time", lambda: wall() + 3600))
    monkeypatch.setattr(time, "time", wall)
    summary = line(combined(tmp_path / "out", capsys), "jpwr-summary:")
    assert float(summary["duration_s"]) < 60, summary
    assert float(summary["total_wh"]) == pytest.approx(WATTS * float(summary["duration_s"]) / 3600,
                                                       rel=0.05), summary


def test_hwmon_sensors_that_all_read_0_w_give_no_figure(tmp_path, capsys, sysfs):
    sysfs.hwmon(0, "psu", power1_input=0, power2_input=0)
    from jpwr.sys.hwmon import HwmonPower
    measure(HwmonPower(), tmp_path / "out")
    capsys.readouterr()
    assert cli.main(["combine", str(tmp_path / "out")]) == 1
    assert "read 0 Wh" in capsys.readouterr().err


def test_a_negative_power_reading_counts_as_unanswered():
    power = pd.DataFrame({"time": np.arange(5.0), "method": "pynvml", "device": "gpu0",
                          "source": "measured", "power_w": [100.0, 100.0, -5e4, 100.0, 100.0]})
    table = energy_table(power)
    row = table.iloc[0]
    assert row["refused"] == NEGATIVE and row["missing"] == 1
    assert row["energy_wh"] == pytest.approx(200 / 3600)  # the two answered intervals
    summary = aggregate.summarize(table.assign(host="n1", counted=True, origin=aggregate.FROM_ENERGY,
                                               file="x"))
    assert summary["complete"] == "no" and summary["total_wh"] > 0
