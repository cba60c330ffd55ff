"""gh, rapl, hwmon and estimate against fake sysfs/procfs trees."""

import math
from types import SimpleNamespace

import pytest

from jpwr.method import ESTIMATED, MEASURED, MethodUnavailable
from jpwr.sys.estimate import EstimatedPower, count_cpus, cpu_times
from jpwr.sys.gh import GraceHopperPower
from jpwr.sys.hwmon import HwmonPower
from jpwr.sys.rapl import RaplPower, RaplZone


def test_gh_reads_the_four_rails_per_socket_in_watts(sysfs):
    rails = {"Module": 610_000_000, "Grace": 120_000_000, "CPU": 90_000_000, "SysIO": 20_000_000}
    index = 0
    for socket in (1, 0):
        for rail, microwatts in rails.items():
            sysfs.gh_meter(index, f"{rail} Power Socket {socket}", microwatts + socket)
            index += 1
    sysfs.hwmon(index, "nvme", temp1_input=40000)  # not a power meter
    gh = GraceHopperPower()
    assert [c.device for c in gh.channels] == [
        "module-0", "grace-0", "cpu-0", "sysio-0", "module-1", "grace-1", "cpu-1", "sysio-1"]
    assert gh.read() == pytest.approx([610.0, 120.0, 90.0, 20.0, 610.000001, 120.000001,
                                       90.000001, 20.000001])
    assert all(c.source == MEASURED for c in gh.channels)


def test_gh_without_meters_names_what_is_missing(sysfs):
    sysfs.hwmon(0, "coretemp", temp1_input=40000)
    with pytest.raises(MethodUnavailable, match=r"^gh: no Grace-Hopper power meter .*Module Power"):
        GraceHopperPower()


def test_hwmon_reads_every_power_input_with_its_label(sysfs):
    sysfs.hwmon(0, "coretemp", temp1_input=40000)
    sysfs.hwmon(1, "psu", power1_input=350_500_000, power1_label="PSU1",
                power2_input=10_000_000, power10_input=1_000_000)
    hwmon = HwmonPower()
    assert [c.device for c in hwmon.channels] == ["psu/hwmon1/power1", "psu/hwmon1/power2",
                                                  "psu/hwmon1/power10"]
    assert hwmon.channels[0].info == "PSU1"
    assert hwmon.read() == pytest.approx([350.5, 10.0, 1.0])


def test_hwmon_sensor_that_disappears_gives_nan_and_one_warning(sysfs, capsys):
    sysfs.hwmon(0, "psu", power1_input=100_000_000, power2_input=50_000_000)
    hwmon = HwmonPower()
    (sysfs.root / "class/hwmon/hwmon0/power2_input").unlink()
    first, second = hwmon.read(), hwmon.read()
    assert first[0] == second[0] == pytest.approx(100.0)
    assert math.isnan(first[1]) and math.isnan(second[1])
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "psu/hwmon0/power2" in warnings[0]


def test_hwmon_without_sensors_is_unavailable(sysfs):
    with pytest.raises(MethodUnavailable, match=r"^hwmon: no power\*_input sensor"):
        HwmonPower()


def test_rapl_zones_are_named_after_their_package(sysfs):
    sysfs.rapl_zone("intel-rapl:0", "package-0", 1_000)
    sysfs.rapl_zone("intel-rapl:0:0", "core", 500)
    sysfs.rapl_zone("intel-rapl:0/intel-rapl:0:0", "core", 500)  # the nested copy
    sysfs.rapl_zone("intel-rapl:0:1", "dram", 200)
    sysfs.rapl_zone("intel-rapl:1", "package-1", 1_000)
    sysfs.rapl_zone("intel-rapl-mmio:0", "package-0", 1_000)  # same package again
    rapl = RaplPower()
    assert [c.device for c in rapl.channels] == [
        "package-0", "package-0/core", "package-0/dram", "package-1"]


def test_rapl_power_is_the_counter_increase_over_time(sysfs, monkeypatch):
    energy = sysfs.rapl_zone("intel-rapl:0", "package-0", 5_000_000)
    clock = iter([100.0, 100.5, 101.5])
    monkeypatch.setattr("jpwr.sys.rapl.time", SimpleNamespace(monotonic=lambda: next(clock)))
    rapl = RaplPower()
    rapl.start()
    sysfs.write(energy, 5_000_000 + 40_000_000)  # 40 J in 0.5 s
    assert rapl.read() == pytest.approx([80.0])
    sysfs.write(energy, 5_000_000 + 70_000_000)  # 30 J in 1 s
    assert rapl.read() == pytest.approx([30.0])
    assert rapl.energy_j() == pytest.approx([70.0])


def test_rapl_counter_wraparound(sysfs, monkeypatch):
    max_range = 262_143_328_850
    energy = sysfs.rapl_zone("intel-rapl:0", "package-0", max_range - 10_000_000, max_range)
    clock = iter([0.0, 1.0, 2.0])
    monkeypatch.setattr("jpwr.sys.rapl.time", SimpleNamespace(monotonic=lambda: next(clock)))
    rapl = RaplPower()
    rapl.start()
    sysfs.write(energy, 15_000_000)  # 10 J up to the top, then 15 J past zero
    assert rapl.read() == pytest.approx([25.0])
    sysfs.write(energy, 20_000_000)
    assert rapl.read() == pytest.approx([5.0])
    assert rapl.energy_j() == pytest.approx([30.0])


def test_rapl_zone_keeps_counting_across_repeated_wraps(tmp_path):
    path = tmp_path / "energy_uj"
    path.write_text("90\n")
    zone = RaplZone(path, 100)
    zone.reset(0.0)
    for now, value in enumerate([10, 50, 5, 95, 20], start=1):
        path.write_text(f"{value}\n")
        zone.advance(float(now))
    # 90->10 (+20), ->50 (+40), ->5 (+55), ->95 (+90), ->20 (+25)
    assert zone.total_uj == 230


def test_rapl_unreadable_counter_is_unavailable_with_the_file_named(sysfs):
    sysfs.rapl_zone("intel-rapl:0", "package-0", 1)
    (sysfs.root / "class/powercap/intel-rapl:0/max_energy_range_uj").unlink()
    with pytest.raises(MethodUnavailable, match=r"^rapl: cannot read .*intel-rapl:0"):
        RaplPower()


def test_rapl_without_powercap_is_unavailable(sysfs):
    with pytest.raises(MethodUnavailable, match=r"^rapl: no powercap zone"):
        RaplPower()


def test_cpu_times_leave_out_idle_iowait_and_double_counted_guest():
    text = "cpu  100 5 20 300 40 1 2 3 50 7\ncpu0 1 2\ncpu1 1 2\ncpufreq x\nintr 5\n"
    assert cpu_times(text.splitlines()[0]) == (131, 471)
    assert count_cpus(text) == 2


def test_estimate_follows_the_model_and_is_labelled_estimated(proc_stat, monkeypatch):
    monkeypatch.delenv("JPWR_ESTIMATE_WATTS_PER_CPU", raising=False)
    monkeypatch.delenv("JPWR_ESTIMATE_IDLE_FRACTION", raising=False)
    estimate = EstimatedPower()
    assert estimate.channels[0].source == ESTIMATED
    estimate.start()
    proc_stat.advance(busy=300, idle=100)  # 75 % busy
    # 4 CPUs x 3 W x (0.3 + 0.7 x 0.75)
    assert estimate.read() == pytest.approx([4 * 3.0 * (0.3 + 0.7 * 0.75)])
    proc_stat.advance(busy=0, idle=400)
    assert estimate.read() == pytest.approx([4 * 3.0 * 0.3])
    # No tick since the last sample: the last utilisation still holds.
    assert estimate.read() == pytest.approx([4 * 3.0 * 0.3])


def test_estimate_model_can_be_overridden(proc_stat, monkeypatch):
    monkeypatch.setenv("JPWR_ESTIMATE_WATTS_PER_CPU", "10")
    monkeypatch.setenv("JPWR_ESTIMATE_IDLE_FRACTION", "0.5")
    from_env = EstimatedPower()
    given = EstimatedPower(watts_per_cpu=2, idle_fraction=0)
    for method in (from_env, given):
        method.start()
    proc_stat.advance(busy=100, idle=100)
    assert from_env.read() == pytest.approx([4 * 10 * (0.5 + 0.5 * 0.5)])
    assert given.read() == pytest.approx([4 * 2 * 0.5])
    assert from_env.describe()["watts_per_cpu"] == 10


@pytest.mark.parametrize("settings", [{"watts_per_cpu": 0}, {"idle_fraction": 1.5}])
def test_estimate_rejects_impossible_models(proc_stat, settings):
    with pytest.raises(ValueError, match="estimate"):
        EstimatedPower(**settings)


def test_estimate_without_proc_stat_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.setenv("JPWR_PROCFS_ROOT", str(tmp_path))
    with pytest.raises(MethodUnavailable, match=r"^estimate: cannot read CPU times"):
        EstimatedPower()
