"""pm_counters: HPE Cray's node, CPU, memory and accelerator counters in a
fake sysfs tree (cray/pm_counters), their freshness, startup and generation
checks, and how they count beside the other methods."""

import math
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from jpwr import aggregate
from jpwr.counting import scope_of
from jpwr.method import MethodUnavailable
from jpwr.sys import pm_counters
from jpwr.sys.pm_counters import PmCountersPower, parse
from tests.pm_counters_files import DrivenCounters

ENERGY = {"": 5_000_000, "cpu": 2_000_000, "memory": 300_000, "accel0": 1_000_000,
          "accel1": 1_100_000, "accel10": 900_000, "accel": 3_000_000}
POWER = {"": 900, "cpu": 300, "memory": 50, "accel0": 250, "accel1": 260, "accel10": 240, "accel": 750}


@pytest.fixture
def folder(sysfs):
    written = sysfs.pm_counters()
    written.write(ENERGY, POWER, timestamp_us=7_810_213_855_886)
    return written


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(pm_counters, "time", SimpleNamespace(monotonic=clock.monotonic))
    return clock


def test_the_node_its_domains_and_each_accelerator_each_with_its_scope(folder):
    method = PmCountersPower()
    devices = [c.device for c in method.channels]
    # accel_energy is the accelerators' total and is left out beside them
    assert devices == ["node", "cpu", "memory", "accel0", "accel1", "accel10"]
    assert [scope_of("pm_counters", d) for d in devices] == [
        "node", "cpu-domain", "memory-domain", "accelerator", "accelerator", "accelerator"]
    assert method.read() == [900, 300, 50, 250, 260, 240]
    assert method.energy_j() == [5_000_000, 2_000_000, 300_000, 1_000_000, 1_100_000, 900_000]
    assert method.describe() | {"root": ""} == {
        "root": "", "version": 3, "raw_scan_hz": 10, "startup": folder.startup, "generations": [1],
        "restarted": False, "unsteady_sets": 0}


def test_the_accelerators_total_is_a_channel_where_no_numbered_file_exists(sysfs):
    sysfs.pm_counters().write({"": 10, "accel": 4}, {"": 100, "accel": 40})
    assert [c.device for c in PmCountersPower().channels] == ["node", "accel"]


@pytest.mark.parametrize("text, unit, expected", [
    ("2869283299 J 7810213855886 us", "J", (2869283299, 7810213855886)),  # version 3
    ("598732067 J", "J", (598732067, None)),  # older versions
    ("85 W", "W", (85, None)),
    ("85", "W", (85, None)),
])
def test_both_file_formats_are_read(text, unit, expected):
    assert parse(text, unit) == expected


def test_a_file_in_another_unit_is_refused():
    with pytest.raises(ValueError, match="unit is 'W', not 'J'"):
        parse("85 W 1 us", "J")


def test_a_set_read_while_the_controller_updates_is_read_again(folder, monkeypatch):
    method = PmCountersPower()
    real = pm_counters.read_text
    updated = []

    def updating(path):
        # the controller updates between two of this set's files, once
        if path.name == "cpu_power" and not updated:
            updated.append(path)
            folder.write({**ENERGY, "": 5_000_090}, {**POWER, "": 901, "cpu": 301})
        return real(path)
    monkeypatch.setattr(pm_counters, "read_text", updating)
    # the first try saw node power 900 and cpu power 301: two updates; the second one update's
    assert method.read()[:2] == [901, 301]
    assert method.energy_j()[0] == 5_000_090
    assert method.unsteady_sets == 0


def test_a_controller_that_updates_during_every_try_still_gives_each_files_value(folder, monkeypatch):
    method = PmCountersPower()
    real = pm_counters.read_text

    def always_updating(path):
        if path.name == "freshness":
            folder.freshness += 1
        return real(path) if path.name != "freshness" else str(folder.freshness)
    monkeypatch.setattr(pm_counters, "read_text", always_updating)
    assert method.read() == [900, 300, 50, 250, 260, 240]
    assert method.unsteady_sets == 1


def test_counters_that_stop_updating_give_nan_and_one_warning(folder, clock, capsys):
    method = PmCountersPower()
    assert method.read()[0] == 900
    clock.now += 1.9  # 19 missed updates at 10 Hz: still within the limit
    assert method.read()[0] == 900
    clock.now += 0.2
    stale = [method.read(), method.read()]
    assert all(math.isnan(w) for reading in stale for w in reading)
    assert all(math.isnan(j) for j in method.energy_j())
    warnings = [line for line in capsys.readouterr().err.splitlines() if "not been updated" in line]
    assert len(warnings) == len(method.channels)  # one per channel, not one per sample
    assert "freshness stays at 1" in warnings[0]
    folder.write(ENERGY, {**POWER, "": 700})
    assert method.read()[0] == 700


def test_a_controller_restart_leaves_the_integral_as_the_figure(folder, capsys):
    method = PmCountersPower()
    assert method.energy_j()[0] == 5_000_000
    folder.startup += 1
    folder.write({name: 10 for name in ENERGY}, POWER)  # the counters start again
    assert all(math.isnan(j) for j in method.energy_j())
    assert method.read()[0] == 900  # the power readings stand
    assert method.describe()["restarted"] is True
    said = capsys.readouterr().err
    assert said.count("controller restarted") == 1 and f"startup {folder.startup - 1} -> " in said


def test_a_power_cap_change_during_the_run_is_said_and_kept(folder, capsys):
    method = PmCountersPower()
    folder.generation = 2
    folder.write(ENERGY, POWER)
    method.read()
    method.read()
    assert method.describe()["generations"] == [1, 2]
    assert capsys.readouterr().err.count("power cap changed during the run (generation 1 -> 2)") == 1
    assert method.energy_j()[0] == 5_000_000  # the counters still count


def test_without_the_folder_it_is_unavailable(sysfs):
    with pytest.raises(MethodUnavailable, match=r"^pm_counters: no HPE Cray power management "
                                                r"counters \(.*cray/pm_counters does not exist\)"):
        PmCountersPower()


def test_a_counter_without_its_power_file_or_in_another_unit_is_left_out(sysfs, capsys):
    counters = sysfs.pm_counters()
    counters.write({"": 10, "cpu": 5}, {"": 100})
    (counters.directory / "memory_energy").write_text("5 W 1 us\n")
    (counters.directory / "memory_power").write_text("5 W 1 us\n")
    assert [c.device for c in PmCountersPower().channels] == ["node"]
    err = capsys.readouterr().err
    assert "skipping cpu" in err and "cpu_power" in err and "skipping memory" in err


def test_a_folder_without_a_readable_pair_is_unavailable(sysfs):
    sysfs.pm_counters().write({}, {"": 100})
    with pytest.raises(MethodUnavailable, match=r"^pm_counters: no readable <name>_energy and "
                                                r"<name>_power pair in "):
        PmCountersPower()


def test_a_run_at_a_known_power_gives_each_scope_its_own_figure_from_the_counters(sysfs, tmp_path):
    """jpwr's command on a node whose controller updates its counters at
    100 Hz while it draws 400 W: the node, its CPU and memory domains and its
    accelerator each get their counter's figure, none added to another."""
    driven = DrivenCounters(sysfs.pm_counters(raw_scan_hz=100), 400.0,
                            {"cpu": 0.5, "memory": 0.1, "accel0": 0.25}).start()
    try:
        env = {**os.environ, "JPWR_SYSFS_ROOT": str(sysfs.root)}
        subprocess.run([sys.executable, "-m", "jpwr", "--methods", "pm_counters", "--interval", "50",
                        "--df-out", str(tmp_path / "out"), "--df-suffix", "_rank0", "sleep", "3"],
                       env=env, check=True, capture_output=True, timeout=120)
    finally:
        driven.stop()
    table = aggregate.combine([tmp_path / "out"]).set_index("device")
    assert list(table.index[table["counted"]]) == ["accel0"]  # the node's accelerators
    assert set(table["basis"]) == {"counter"}
    for device, share in (("node", 1.0), ("cpu", 0.5), ("memory", 0.1), ("accel0", 0.25)):
        row = table.loc[device]
        expected_wh = 400.0 * share * row["duration_s"] / 3600
        # the counters step at 100 Hz in whole joules, 10 ms at each end; on a busy host the thread
        # that plays the controller updates them later, and a reading can be as old as its longest gap
        rel = max(0.03, 2 * driven.max_gap_s / row["duration_s"])
        assert row["energy_wh"] == pytest.approx(expected_wh, rel=rel)
        assert row["integrated_wh"] == pytest.approx(row["energy_wh"], rel=rel)
    scopes = dict(kv.split("=") for kv in aggregate.scope_lines(table.reset_index())[-1].split()[1:])
    assert {scope: float(wh) for scope, wh in scopes.items()} == {
        scope: pytest.approx(table.loc[device, "energy_wh"], rel=1e-5)
        for scope, device in (("node", "node"), ("cpu-domain", "cpu"), ("memory-domain", "memory"),
                              ("accelerator", "accel0"))}
