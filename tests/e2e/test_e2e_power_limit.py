"""A power-limit sweep end to end: `jube run llm_benchmark_nvidia_amd.yaml
--tag LOCAL powercap` on this host's CPU through the real JUBE and the
test Slurm cluster, with NVML faked at its binding only (tests/fake_bindings:
one GPU whose state lives in a file, since each job runs in processes of
its own). One run, one job per point: the default limit, a limit that
trains to the end, one whose job gets TERM as its timed window begins, one
whose step fails, one whose rank is killed outright (SIGKILL: the job's
power guard puts its limit back) and one the fake device refuses as without
privilege. Every row names its point and the limit the device reported, and
the device's limit is back at its start value after each job. A second run
leaves a limit that neither the rank nor the guard can put back: its
`default` point is then no measurement, and caraml-compare ranks it not."""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.jube_runs import ROOT, JubeRun

LLM = "llm_training/llm_benchmark_nvidia_amd.yaml"
START_MW = 250_000
pytestmark = [pytest.mark.jube, pytest.mark.slurm]


def test_a_sweep_gives_one_row_per_limit_and_leaves_the_device_as_it_found_it(tmp_path, slurm):
    state = tmp_path / "nvml.json"
    state.write_text(json.dumps({
        "gpus": [{"uuid": "GPU-fake-0", "power_mw": 0, "energy_mj": 0, "limit_mw": START_MW,
                  "default_mw": START_MW, "limit_range_mw": [100_000, 300_000]}],
        "at_limit_mw": {"150000": "term", "200000": "raise", "170000": "kill", "120000": "refuse"}}))
    env = {**slurm.env, "CARAML_FAKE_NVML_STATE": str(state),
           # the refused point last: it stops the points after it (they would be refused alike)
           "CARAML_POWER_LIMITS": "default;180;150;200;170;120",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "fake_bindings"),
                                          slurm.env.get("PYTHONPATH", str(ROOT))])}
    run = JubeRun(LLM, tmp_path / "run", env=env)
    table = run.run_through_slurm(slurm, "LOCAL", "powercap", "smoke", "synthetic")
    rows = {str(r["PowerLimit"]): r for _, r in table.iterrows()}
    assert sorted(rows) == ["120", "150", "170", "180", "200", "default"], table.to_dict("records")

    def cells(point):
        r = rows[point]
        return r["Status"], r["PowerLimit/device(W)"]

    assert cells("default") == ("ok", 250)  # nothing set: the limit the device had
    assert cells("180") == ("ok", 180)
    assert cells("150") == ("ok-stopped-early", 150)
    # cut short after one timed iteration: the stop, and the verdict on a row that short
    assert rows["150"]["Error"].startswith("signal SIGTERM; not a measurement (1 timed iteration in ")
    assert cells("200") == ("failed", 200)  # the step failed under the limit it had set
    # killed outright, named for what killed it: no OOM killer said it did
    assert rows["170"]["Status"] == "failed"
    assert "rank 0 killed by SIGKILL" in rows["170"]["Error"]
    assert "(not by the OOM killer: the job" in rows["170"]["Error"], rows["170"]["Error"]
    assert rows["120"]["Status"] == "failed"
    assert "needs root" in rows["120"]["Error"] and rows["120"]["Iterations"] != \
        rows["120"]["Iterations"]  # no iteration: refused before training
    assert "the centre must provide" in rows["120"]["Error"]

    # each job script shows its point on the driver's command line (as a dry run's does)
    assert sorted(re.search(r"--power-limit (\S+)", (work / "job.sh").read_text()).group(1)
                  for work in run.work_dirs("execute")) == sorted(rows)

    # each job put the limit back before the next set one (the killed rank's job through its
    # guard), and the device ends where it began
    final = json.loads(state.read_text())
    assert final["gpus"][0]["limit_mw"] == START_MW
    assert final["set_mw"][1::2] == [START_MW] * 4
    assert sorted(final["set_mw"][0::2]) == [150_000, 170_000, 180_000, 200_000]

    # row.json: the contract's fields, and the mean power drawn in the timed
    # window (the fake GPU draws 60 % of its limit)
    decided = {}
    for path in run.run_dir.glob("*_combine_energy/work/row.json"):
        row = json.loads(path.read_text())
        decided[row["power_limit"]] = row
    limit = {name: value for name, value in decided["180"].items() if name.startswith("power_limit")}
    assert limit == {"power_limit": "180", "power_limit_asked_w": 180.0, "power_limit_scope": "gpu",
                     "power_limit_mode": "suite", "power_limit_before_w": 250.0, "power_limit_w": 180.0,
                     "power_limit_restored": True, "power_limit_restored_by": "ranks",
                     "power_limit_differs_on_ranks": [], "power_limit_put_back_early": [],
                     "power_limit_at_start_w": 250.0, "power_limit_default_w": 250.0,
                     "power_limit_not_default_at_start": []}
    assert decided["180"]["power_w_per_device_timed"] == pytest.approx(0.6 * 180, rel=0.1)
    assert decided["150"]["power_limit_restored"] is True
    assert decided["200"]["power_limit_restored"] is True
    assert decided["default"]["power_limit_asked_w"] is None
    assert (decided["170"]["power_limit_restored"], decided["170"]["power_limit_restored_by"]) == \
        (True, "guard")
    assert not [f for row in decided.values() for f in row["flags"] if f.startswith("power-limit-not")]
    assert decided["default"]["power_limit_default_w"] == 250.0


def test_a_limit_left_behind_makes_the_default_point_after_it_no_measurement(tmp_path, slurm):
    """The 190 W point's rank is killed and the device then refuses the guard's
    set too (a node nothing in the job can mend; the test cluster has no
    epilog): the `default` point after it starts at 190 W, is flagged, is no
    measurement, and caraml-compare ranks nothing on it."""
    from caraml.compare import rows as compare_rows

    state = tmp_path / "nvml.json"
    state.write_text(json.dumps({
        "gpus": [{"uuid": "GPU-fake-0", "power_mw": 0, "energy_mj": 0, "limit_mw": START_MW,
                  "default_mw": START_MW, "limit_range_mw": [100_000, 300_000]}],
        "at_limit_mw": {"190000": "stuck"}}))
    env = {**slurm.env, "CARAML_FAKE_NVML_STATE": str(state), "CARAML_POWER_LIMITS": "190;default",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "fake_bindings"),
                                          slurm.env.get("PYTHONPATH", str(ROOT))])}
    run = JubeRun(LLM, tmp_path / "run", env=env)
    run.run_through_slurm(slurm, "LOCAL", "powercap", "smoke", "synthetic")
    decided = {}
    for path in run.run_dir.glob("*_combine_energy/work/row.json"):
        row = json.loads(path.read_text())
        decided[row["power_limit"]] = row
    left, default = decided["190"], decided["default"]
    assert left["state"] == "failed" and "killed by SIGKILL" in left["reason"]
    assert left["power_limit_restored"] is False and "power-limit-not-restored" in left["flags"]
    # the job ran to its figures; the one verdict says it measured another limit than its name
    assert default["state"] in ("ok", "ok-stopped-early") and default["measurement"] is False
    assert default["not_a_measurement"].startswith(
        "its devices' power limit was not their default at the job's start (190W-not-250W-on-ranks-0)")
    assert "power-limit-not-default-at-start(190W-not-250W-on-ranks-0)" in default["flags"]
    assert json.loads(state.read_text())["gpus"][0]["limit_mw"] == 190_000  # left: the epilog's to mend
    table = compare_rows.load([str(run.run_dir)])
    ranked, _ = compare_rows.at_default_limit(table)
    assert len(ranked) == 1 and compare_rows.measured(ranked).empty
