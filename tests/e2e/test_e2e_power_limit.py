"""A power-limit sweep end to end: `jube run llm_benchmark_nvidia_amd.yaml
--tag LOCAL powercap` on this host's CPU through the real JUBE and the
test Slurm cluster, with NVML faked at its binding only (tests/fake_bindings:
one GPU whose state lives in a file, since each job runs in processes of
its own). One run, one job per point: the default limit, a limit that
trains to the end, one whose job gets TERM as its timed window begins, one
whose step fails, and one the fake device refuses as without privilege.
Every row names its point and the limit the device reported, and the
device's limit is back at its start value after each job."""

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
                  "limit_range_mw": [100_000, 300_000]}],
        "at_limit_mw": {"150000": "term", "200000": "raise", "120000": "refuse"}}))
    env = {**slurm.env, "CARAML_FAKE_NVML_STATE": str(state),
           "CARAML_POWER_LIMITS": "default;180;150;200;120",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "fake_bindings"),
                                          slurm.env.get("PYTHONPATH", str(ROOT))])}
    run = JubeRun(LLM, tmp_path / "run", env=env)
    table = run.run_through_slurm(slurm, "LOCAL", "powercap", "smoke", "synthetic")
    rows = {str(r["PowerLimit"]): r for _, r in table.iterrows()}
    assert sorted(rows) == ["120", "150", "180", "200", "default"], table.to_dict("records")

    def cells(point):
        r = rows[point]
        return r["Status"], r["PowerLimit/device(W)"]

    assert cells("default") == ("ok", 250)  # nothing set: the limit the device had
    assert cells("180") == ("ok", 180)
    assert cells("150") == ("ok-stopped-early", 150)
    # cut short after one timed iteration: the stop, and the verdict on a row that short
    assert rows["150"]["Error"].startswith("signal SIGTERM; not a measurement (1 timed iteration in ")
    assert cells("200") == ("failed", 200)  # the step failed under the limit it had set
    assert rows["120"]["Status"] == "failed"
    assert "needs root" in rows["120"]["Error"] and rows["120"]["Iterations"] != \
        rows["120"]["Iterations"]  # no iteration: refused before training

    # each job script shows its point on the driver's command line (as a dry run's does)
    assert sorted(re.search(r"--power-limit (\S+)", (work / "job.sh").read_text()).group(1)
                  for work in run.work_dirs("execute")) == sorted(rows)

    # each job put the limit back before the next set one, and the device ends where it began
    final = json.loads(state.read_text())
    assert final["gpus"][0]["limit_mw"] == START_MW
    assert final["set_mw"][1::2] == [START_MW] * 3
    assert sorted(final["set_mw"][0::2]) == [150_000, 180_000, 200_000]

    # row.json: the contract's fields, and the mean power drawn in the timed
    # window (the fake GPU draws 60 % of its limit)
    decided = {}
    for path in run.run_dir.glob("*_combine_energy/work/row.json"):
        row = json.loads(path.read_text())
        decided[row["power_limit"]] = row
    limit = {name: value for name, value in decided["180"].items() if name.startswith("power_limit")}
    assert limit == {"power_limit": "180", "power_limit_asked_w": 180.0, "power_limit_scope": "gpu",
                     "power_limit_before_w": 250.0, "power_limit_w": 180.0, "power_limit_restored": True}
    assert decided["180"]["power_w_per_device_timed"] == pytest.approx(0.6 * 180, rel=0.1)
    assert decided["150"]["power_limit_restored"] is True
    assert decided["200"]["power_limit_restored"] is True
    assert decided["default"]["power_limit_asked_w"] is None
