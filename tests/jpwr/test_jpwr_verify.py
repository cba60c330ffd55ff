"""jpwr.verify: a run's energy files counted again from its samples and
counters, every figure that differs named."""

import re
import time

import pandas as pd
import pytest

from jpwr import verify
from jpwr.ctxmgr import get_power


@pytest.fixture
def run_files(tmp_path, synthetic):
    """A real measured run (jpwr's own files) with a timed window."""
    out = tmp_path / "energy"
    with get_power([synthetic(lambda now: 200.0 + 100.0 * (now % 1), devices=("a", "b"))], 20,
                   out_dir=out, suffix="_rank0") as scope:
        scope.begin_window("timed")
        time.sleep(0.3)
        scope.end_window("timed")
    return out


def test_a_run_as_jpwr_wrote_it_has_no_difference(run_files):
    assert verify.differences([run_files]) == []


def test_a_raised_channel_figure_is_named_with_both_values(run_files):
    path = run_files / "energy_rank0.csv"
    table = pd.read_csv(path, dtype={"device": str})
    stated = float(table.loc[0, "energy_wh"])
    table.loc[0, "energy_wh"] = stated * 1.3
    table.to_csv(path, index=False)
    [line] = verify.differences([run_files])
    found = re.fullmatch(r"energy_rank0.csv hwmon a: energy_wh (\S+) Wh, its samples and counter give "
                         r"(\S+) Wh", line)
    # counted again from samples written to the milliwatt: the same figure to about a millionth
    assert found and float(found.group(1)) == pytest.approx(stated * 1.3, rel=1e-5)
    assert float(found.group(2)) == pytest.approx(stated, rel=1e-5)


def test_a_window_whose_samples_were_raised_no_longer_gives_its_figure(run_files):
    power = pd.read_csv(run_files / "power_rank0.csv", dtype={"device": str})
    power["power_w"] *= 0.5  # the samples halved, the figures as they were
    power.to_csv(run_files / "power_rank0.csv", index=False)
    found = verify.differences([run_files])
    assert any(line.startswith("windows_rank0.csv window timed hwmon a: energy_wh") for line in found)
    assert any(line.startswith("energy_rank0.csv hwmon b: energy_wh") for line in found)
