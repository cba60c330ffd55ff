"""The one verdict on a row (caraml/row/verdict.py): the rules in their
order, each naming why a row is no measurement, and the window a row
planned as a measurement runs (the measure tag)."""

from __future__ import annotations

import dataclasses

import pytest

from caraml.row import verdict
from caraml.row.record import Row
from caraml.row.verdict import judged

MEASURED = Row(state="ok", timed_iterations=90, time_per_iteration_s=1.0, timed_s=90.0,
               energy_scope="gpu", energy_window="timed", energy_complete_timed=True,
               energy_complete_run=True, energy_covered_pct=100.0)


@pytest.mark.parametrize("changes, why", [
    ({}, ""),
    ({"state": "failed", "reason": "out of memory"}, "failed: out of memory"),
    # a job not ended has no reason of its status: the verdict says what to wait for
    ({"state": "queued"}, "queued: the job has not started yet: its row is decided once it has run "
                          "(`jube continue`)"),
    # the row: 55 timed iterations in 8 s
    ({"timed_iterations": 55, "timed_s": 8.0}, "55 timed iterations in 8 s; a measurement needs 20 and 60 s"),
    ({"timed_iterations": 19, "timed_s": 600.0},
     "19 timed iterations in 600 s; a measurement needs 20 and 60 s"),
    ({"timed_iterations": 1, "timed_s": 3.5}, "1 timed iteration in 3.5 s; a measurement needs 20 and 60 s"),
    ({"timed_s": None}, "its timed iterations or their time are not recorded"),
    ({"energy_window": "run", "energy_complete_timed": False, "energy_complete_run": False,
      "energy_covered_pct": 11.2}, "its energy is not whole (its samples cover 11 % of the run)"),
    ({"energy_scope": "gpu+module"}, "its energy adds the different scopes of its hosts (gpu+module)"),
    # a whole timed window stays the headline of a run whose energy is not whole
    ({"energy_complete_run": False, "energy_covered_pct": 50.0}, ""),
    # a row that measured no energy is a measurement of its throughput
    ({"energy_scope": None}, ""),
    # numerics: a diverged run names its first loss that is not finite, before its length
    ({"loss_first": 9.0, "loss_nonfinite": "nan", "loss_nonfinite_at": 3, "timed_iterations": 4},
     "loss nan at iteration 3"),
    ({"skipped_iterations": 5}, "5 of 90 timed iterations skipped their update; a measurement allows 5 %"),
    ({"skipped_iterations": 4}, ""),
    ({"loss_first": 9.1, "loss_untrained": 9.0, "loss_tolerance": 0.15}, ""),
    ({"loss_first": 30.0, "loss_untrained": 9.0, "loss_tolerance": 0.15},
     "first loss 30, outside 9 ± 15 % (the loss of a model that has learnt nothing)"),
    ({"loss_first": 9.0, "loss_last": 8.9, "loss_fall_needed": 0.05},
     "loss 9 to 8.9 over the run: a run on a real corpus falls by at least 5 %"),
    ({"loss_first": 9.0, "loss_last": 6.0, "loss_fall_needed": 0.05}, ""),
    # a smoke run too short to learn is named too short, not for its loss
    ({"loss_first": 9.0, "loss_last": 8.9, "loss_fall_needed": 0.05, "timed_iterations": 4, "timed_s": 2.0},
     "4 timed iterations in 2 s; a measurement needs 20 and 60 s"),
    # a vendor's trainer logs no loss the suite reads: nothing to judge
    ({"loss_untrained": 9.0, "loss_tolerance": 0.15, "loss_fall_needed": 0.05}, ""),
])
def test_each_rule_names_why_a_row_is_no_measurement(changes, why):
    row = judged(dataclasses.replace(MEASURED, **changes))
    assert (row.measurement, row.not_a_measurement) == (not why, why)


OFF = ("180W-not-250W-on-ranks-0-1",)


@pytest.mark.parametrize("changes, measurement", [
    ({}, False),  # a plain run on devices left capped
    ({"power_limit": "default", "power_limit_mode": "suite"}, False),
    ({"power_limit": "200", "power_limit_mode": "suite"}, False),  # set on top of a leftover limit
    ({"power_limit": "200", "power_limit_mode": None}, False),  # a driver that set none
    ({"power_limit": "default", "power_limit_mode": "external"}, False),  # the centre set nothing
    ({"power_limit": "200", "power_limit_mode": "external"}, True),  # the centre's limit, on purpose
])
def test_a_run_whose_devices_began_away_from_their_default_limit_is_no_measurement(changes, measurement):
    row = judged(dataclasses.replace(MEASURED, power_limit_not_default_at_start=OFF, **changes))
    assert row.measurement is measurement
    assert row.not_a_measurement == ("" if measurement else (
        "its devices' power limit was not their default at the job's start (180W-not-250W-on-ranks-0-1): "
        "a limit left by an earlier point or job that was not put back; reset the node's limits (the "
        "epilog site/slurm-epilog-power-limits.sh, or nvidia-smi -i N -pl W as root) and run it again"))


def test_a_run_at_the_wrong_limit_is_named_so_before_it_is_named_short():
    row = judged(dataclasses.replace(MEASURED, power_limit_not_default_at_start=OFF, timed_iterations=3))
    assert row.not_a_measurement.startswith("its devices' power limit was not their default")


def test_the_window_a_measurement_plans_meets_the_rule_and_a_setting_shortens_it(capsys, monkeypatch):
    monkeypatch.delenv(verdict.WINDOW_ENV, raising=False)
    assert verdict.PLANNED_WINDOW_S > verdict.MIN_TIMED_SECONDS
    assert verdict.window_s({}) == verdict.PLANNED_WINDOW_S
    assert verdict.window_s({verdict.WINDOW_ENV: "5"}) == 5.0
    with pytest.raises(ValueError, match="CARAML_MEASURE_S='0' is no positive number of seconds"):
        verdict.window_s({verdict.WINDOW_ENV: "0"})
    assert verdict.main(["window"]) == 0
    assert capsys.readouterr().out == "--min-timed-iterations 20 --min-timed-seconds 61"
