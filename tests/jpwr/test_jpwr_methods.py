"""Method names, and what auto picks."""

import pytest
from jpwr_fakes import FakeNvml

from jpwr.method import MethodUnavailable
from jpwr.methods import NAMES, UnknownMethod, auto, from_names


def test_the_names_the_suite_relies_on():
    assert set(NAMES) == {"pynvml", "rocm", "gc", "gh", "pm_counters", "rapl", "hwmon", "estimate",
                          "auto"}


@pytest.mark.parametrize("names", [["nvml"], ["rapl", "bogus"], []])
def test_unknown_or_no_method_is_refused_before_anything_is_opened(names, install):
    fake = FakeNvml([{"uuid": "GPU-1", "power_mw": 1, "energy_mj": 1}])
    install("pynvml", fake)
    with pytest.raises(UnknownMethod, match="known: pynvml, rocm, gc, gh, pm_counters, rapl, hwmon, "
                                            "estimate, auto"):
        from_names(["pynvml", *names] if names else names)
    assert fake.initialised == 0


def test_a_missing_library_fails_with_one_line(no_vendor_libraries):
    with pytest.raises(MethodUnavailable) as caught:
        from_names(["gc"])
    assert "\n" not in str(caught.value) and "gcipuinfo" in str(caught.value)


def test_auto_picks_every_real_sensor_and_says_so(sysfs, proc_stat, install):
    install("pynvml", FakeNvml([{"uuid": "GPU-1", "power_mw": 1, "energy_mj": 1}]))
    sysfs.hwmon(0, "psu", power1_input=1_000_000)
    sysfs.rapl_zone("intel-rapl:0", "package-0", 1)
    said = []
    picked = auto(report=said.append)
    assert [m.name for m in picked] == ["pynvml", "rapl", "hwmon"]
    assert said[0] == "auto picked pynvml, rapl, hwmon (measured)"
    assert "rocm:" in said[1] and "gc:" in said[1] and "gh:" in said[1] and "pm_counters:" in said[1]


def test_auto_picks_the_cray_counters_where_the_node_has_them(sysfs, proc_stat, no_vendor_libraries):
    sysfs.pm_counters().write({"": 10, "accel0": 5}, {"": 100, "accel0": 50})
    sysfs.rapl_zone("intel-rapl:0", "package-0", 1)
    said = []
    assert [m.name for m in auto(report=said.append)] == ["pm_counters", "rapl"]
    assert said[0] == "auto picked pm_counters, rapl (measured)"


def test_auto_falls_back_to_the_estimate_only_without_sensors(sysfs, proc_stat,
                                                              no_vendor_libraries):
    said = []
    picked = auto(report=said.append)
    assert [m.name for m in picked] == ["estimate"]
    assert picked[0].channels[0].source == "estimated"
    assert said[0] == "auto picked estimate (ESTIMATED, no power sensor found)"


def test_auto_and_an_explicit_name_give_one_method_each(sysfs, proc_stat, no_vendor_libraries,
                                                       capsys):
    sysfs.hwmon(0, "psu", power1_input=1_000_000)
    assert [m.name for m in from_names(["auto", "hwmon", "estimate"])] == ["hwmon", "estimate"]
    assert "auto picked hwmon (measured)" in capsys.readouterr().err


def test_upstream_style_import_still_works(sysfs, no_vendor_libraries):
    from jpwr.sys.gh import power as gh_power
    sysfs.gh_meter(0, "Module Power Socket 0", 500_000_000)
    assert gh_power().read() == pytest.approx([500.0])
