"""An energy figure is never quietly partial: a disk that is full before or
fills during a run, a sensor that stops answering inside the timed window,
a damaged meta.json. The disks are small tmpfs mounts (root needed); the
command is the real `python -m jpwr`."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from jpwr.aggregate import INCOMPLETE, NoEnergyData, combine, combine_windows, notes, summarize, window_lines
from jpwr.ctxmgr import get_power
from jpwr.method import Channel, Method
from tests.jube_runs import ROOT
from tests.reliability.small_disk import fill, small_disk


def jpwr(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jpwr", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=env)


# The measured command of a run whose disk fills: it waits for the file
# named by its first argument, which the test makes once jpwr says samples
# could not be written, so the run lasts as long as this host needs to fill
# the disk (a fixed sleep fills it on a fast host only); the deadline ends a
# run whose disk never fills with a line that says so.
UNTIL_SAMPLES_ARE_LOST = """
import os, sys, time
go, deadline_s = sys.argv[1], float(sys.argv[2])
end = time.monotonic() + deadline_s
while not os.path.exists(go):
    if time.monotonic() > end:
        sys.exit(f"the measured command waited {deadline_s:g} s: jpwr never said it could not append samples")
    time.sleep(0.01)
"""
FILL_DEADLINE_S = 120


def jpwr_until_samples_are_lost(tmp_path: Path, *args: str, env: dict | None = None) -> tuple[int, str]:
    """`python -m jpwr ARGS -- CMD`, where CMD ends once jpwr's stderr says
    it cannot append samples; the exit status and jpwr's stderr."""
    go = tmp_path / "samples-lost"
    command = [sys.executable, "-m", "jpwr", *args, "--",
               sys.executable, "-c", UNTIL_SAMPLES_ARE_LOST, str(go), str(FILL_DEADLINE_S)]
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True) as proc:
        stderr = []
        for line in proc.stderr:
            stderr.append(line)
            if "cannot append samples" in line:
                go.touch()
        return proc.wait(timeout=FILL_DEADLINE_S), "".join(stderr)


def power_meter(root: Path) -> dict[str, str]:
    """The environment of a host with one measured hwmon power meter (a fake sysfs)."""
    meter = root / "class" / "hwmon" / "hwmon0"
    meter.mkdir(parents=True)
    (meter / "name").write_text("psu\n")
    (meter / "power1_input").write_text("100000000\n")  # 100 W in µW
    return {**os.environ, "JPWR_SYSFS_ROOT": str(root)}


def test_on_a_full_disk_the_command_still_runs_and_jpwr_says_why_once(tmp_path):
    marker = tmp_path / "ran"
    with small_disk(tmp_path / "disk") as disk:
        fill(disk)
        proc = jpwr("--methods", "estimate", "--df-out", str(disk / "energy"), "--",
                    "touch", str(marker))
        assert not list((disk / "energy").glob("*.partial"))
    assert proc.returncode == 0 and marker.exists(), proc.stderr
    assert "Traceback" not in proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if "cannot write" in ln]
    assert len(warnings) == 1 and "No space left on device" in warnings[0], proc.stderr


def test_a_disk_that_fills_during_the_run_gives_an_incomplete_figure_that_says_so(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        # 32 KiB take the header and a few hundred samples at 2 ms
        status, stderr = jpwr_until_samples_are_lost(
            tmp_path, "--methods", "hwmon", "--interval", "2", "--flush-s", "0.05",
            "--df-out", str(disk), "--df-suffix", "_rank0", env=power_meter(tmp_path / "sys"))
        assert status == 0, stderr
        assert not list(disk.glob("energy*"))
        combined = jpwr("combine", str(disk))
    assert combined.returncode == 0, combined.stderr
    summary = next(ln for ln in combined.stdout.splitlines() if ln.startswith("jpwr-summary:"))
    assert f"source={INCOMPLETE}" in summary, summary
    # the meta file kept room for the run's end: the samples the power file
    # lacks are counted (those jpwr could not append, and any taken after)
    missing = float(summary.split("missing_pct=")[1].split()[0])
    assert 0 < missing < 100, summary
    assert re.search(rf"{disk}/power_rank0\.\S+\.csv: the run did not finish or could not write",
                     combined.stderr)


def test_a_power_file_cut_before_its_first_line_is_named(tmp_path):
    (tmp_path / "meta_rank0.json").write_text(json.dumps({"host": "n1", "rank": 0}))
    (tmp_path / "power_rank0.csv").write_text("")
    with pytest.raises(NoEnergyData, match=f"{tmp_path}/power_rank0.csv: no samples"):
        combine([tmp_path])


def test_a_damaged_meta_file_is_named_and_flags_the_figure(tmp_path):
    for rank in (0, 1):
        (tmp_path / f"power_rank{rank}.csv").write_text(
            "time,method,device,source,power_w\n0,hwmon,s0,measured,50\n3.6,hwmon,s0,measured,50\n")
    (tmp_path / "meta_rank0.json").write_text(json.dumps({"host": "n1", "rank": 0}))
    (tmp_path / "meta_rank1.json").write_text("{")
    proc = jpwr("combine", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert f"{tmp_path}/meta_rank1.json: not a readable jpwr meta file" in proc.stderr
    assert f"source={INCOMPLETE}" in proc.stdout


def test_a_garbled_power_file_is_named_and_the_others_still_count(tmp_path):
    (tmp_path / "meta_rank0.json").write_text(json.dumps({"host": "n1", "rank": 0}))
    (tmp_path / "power_rank0.csv").write_text(
        "time,method,device,source,power_w\n0,hwmon,s0,measured,50\n3.6,hwmon,s0,measured,50\n")
    (tmp_path / "meta_rank1.json").write_text(json.dumps({"host": "n2", "rank": 1}))
    (tmp_path / "power_rank1.csv").write_bytes(b"\x00\x00\x00\x00\n\x00\x00\n")
    table = combine([tmp_path])
    assert list(table["host"]) == ["n1"]
    assert any(f"{tmp_path}/power_rank1.csv: not a jpwr power file" in ln for ln in notes(table))
    assert summarize(table)["source"] == INCOMPLETE


class RemovedSensor(Method):
    """Answers 100 W until `removed_at`, then raises like a sensor that is gone."""

    name = "hwmon"

    def __init__(self, removed_at: float) -> None:
        super().__init__()
        self.removed_at = removed_at
        self.channels = [Channel("sensor")]

    def read(self) -> list[float]:
        if time.time() >= self.removed_at:
            raise OSError("No such device")
        return [100.0]


def test_a_window_with_a_sensor_gap_is_left_empty_not_filled_with_the_last_reading(tmp_path):
    with get_power([RemovedSensor(time.time() + 0.3)], 20, out_dir=tmp_path,
                   suffix="_rank0") as scope:
        time.sleep(0.1)
        scope.begin_window("timed")
        time.sleep(0.5)  # the sensor goes at 0.3 s
        scope.end_window("timed")
    window = scope.windows().iloc[0]
    assert math.isnan(window["energy_wh"]), window.to_dict()
    line = window_lines(combine_windows([tmp_path]))[0]
    assert "total_wh=nan" in line and f"basis={INCOMPLETE}" in line, line
    # the whole run drops the gap and says so
    table = combine([tmp_path])
    assert summarize(table)["source"] == INCOMPLETE
    assert np.isfinite(table.iloc[0]["energy_wh"])


def _row_energy(jpwr_stdout: str):
    """A row of a run long enough to be a measurement, with the energy the
    row model decides from jpwr combine's lines, and the one verdict on it."""
    from caraml.row.facts import Facts, energy
    from caraml.row.record import make
    from caraml.row.verdict import judged
    fields = energy(jpwr_stdout, Facts(scope_asked="counted", work_total=1000.0, work_timed=None))
    return judged(make({"state": "ok", "timed_iterations": 20, "timed_s": 60.0, **fields}))


def test_an_estimate_from_part_of_the_run_is_never_whole(tmp_path):
    """The estimate's disk fills while the command runs: its figure covers
    part of the run, and says how much, as a measured one would."""
    with small_disk(tmp_path / "disk") as disk:
        status, stderr = jpwr_until_samples_are_lost(
            tmp_path, "--methods", "estimate", "--interval", "2", "--flush-s", "0.05",
            "--df-out", str(disk), "--df-suffix", "_rank0")
        assert status == 0, stderr
        combined = jpwr("combine", str(disk))
    assert combined.returncode == 0, combined.stderr
    summary = next(ln for ln in combined.stdout.splitlines() if ln.startswith("jpwr-summary:"))
    assert "source=estimated" in summary and "complete=no" in summary, summary
    covered = float(summary.split("covered_pct=")[1].split()[0])
    assert 0 < covered < 100, summary  # 32 KiB hold part of the run's samples
    row = _row_energy(combined.stdout)
    assert row.energy_estimated and row.energy_incomplete
    assert not row.energy_complete_run and row.energy_covered_pct == pytest.approx(covered)
    assert row.work_per_wh is None and row.work_per_wh_run is None
    # the one verdict: a partial estimate is no measurement, as a partial measurement is not
    assert not row.measurement
    assert row.not_a_measurement == f"its energy is not whole (its samples cover {covered:.0f} % of the run)"


class GapSensor(Method):
    """Answers 100 W, except between `gone` and `back` (epoch seconds), where it raises."""

    name = "hwmon"

    def __init__(self, gone: float, back: float) -> None:
        super().__init__()
        self.gone, self.back = gone, back
        self.channels = [Channel("sensor")]

    def read(self) -> list[float]:
        if self.gone <= time.time() < self.back:
            raise OSError("No such device")
        return [100.0]


def test_power_per_device_after_a_gap_is_what_the_sensor_read(tmp_path):
    start = time.time()
    with get_power([GapSensor(start + 0.3, start + 0.8)], 20, out_dir=tmp_path, suffix="_rank0"):
        time.sleep(1.2)
    combined = jpwr("combine", str(tmp_path))
    assert combined.returncode == 0, combined.stderr
    row = _row_energy(combined.stdout)
    # the sensor read 100 W whenever it answered; the gap added no energy
    # and must not pull the power down (Wh over the whole span would)
    assert row.power_w_per_device_run == pytest.approx(100.0)
    assert not row.energy_complete_run and 30 < row.energy_covered_pct < 80
    assert not row.measurement
