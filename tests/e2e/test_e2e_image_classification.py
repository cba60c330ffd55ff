"""The image-classification benchmark end to end through the real JUBE, on
this host (local) and through the local Slurm cluster, as a user runs it."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from tests.jube_runs import JubeRun

SCRIPT = "image_classification/image_classification_torch_benchmark.xml"
pytestmark = pytest.mark.jube


def _run(tmp_path, env=None) -> JubeRun:
    return JubeRun(SCRIPT, tmp_path / "run", env={**os.environ, **(env or {})})


def test_cpu_smoke_run_gives_a_full_row_with_consistent_figures(image_cpu_smoke):
    run = image_cpu_smoke
    table = run.table()
    assert len(table) == 1, table
    # a plain `jube result` shows the two short tables; the full one is the CSV file's
    assert run.shown_tables() == ["result", "issues"]
    row = table.iloc[0]
    assert row["Status"] == "ok", row.to_dict()
    assert (row["System"], row["Model"], row["Devices"], row["GlobalBatchSize"]) == ("CPU", "resnet18", 1, 8)
    assert row["Images/s"] > 0
    assert row["Images/s/device"] == pytest.approx(row["Images/s"] / row["Devices"], rel=1e-3)
    # energy is estimated on a host without sensors, and the table says so
    assert row["EnergySource"] == "estimated(estimate)"
    assert row["Energy(Wh)"] > 0
    assert row["MeanPower/device(W)"] > 0
    # the whole loop's figure counts every image the measured window saw: 4 iterations x 8
    assert row["RunImages/Wh"] == pytest.approx(4 * 8 / row["Energy(Wh)"], rel=2e-3)
    # images/Wh: the timed iterations (3 after 1 warm-up), their own window and figure
    assert row["Images/Wh"] == pytest.approx(3 * 8 / row["TimedEnergy(Wh)"], rel=2e-3)
    assert (row["Data"], row["EnergyScope"], row["EnergyDevices"]) == (
        "synthetic", "host-estimate", "1xhost-estimate")
    # where it came from: the commit in the row, the rest in the work package
    provenance = json.loads((run.work_dirs("execute")[0] / "energy" / "provenance.json").read_text())
    assert row["Commit"].startswith(provenance["commit"][:12])
    # every rank left its own energy files
    energy = run.work_dirs("execute")[0] / "energy"
    assert sorted(p.name for p in energy.glob("*rank0*"))


def test_missing_data_path_gives_a_failed_row_naming_it(tmp_path):
    run = _run(tmp_path, env={"CARAML_IMAGE_DATA": str(tmp_path / "no_such_imagenet")})
    run.run("CPU", "smoke")
    row = run.table().iloc[0]
    assert row["Status"] == "failed"
    assert "no_such_imagenet" in row["Error"]
    assert pd.isna(row["Images/s"])


@pytest.mark.parametrize("tags, message", [
    (("CPU", "smoke", "A200"), "unknown tag A200"),
    (("smoke",), "no system tag given"),
])
def test_bad_tags_give_a_failed_row_that_says_why(tmp_path, tags, message):
    run = _run(tmp_path)
    run.run(*tags)
    table = run.table()
    assert set(table["Status"]) == {"failed"}
    assert all(message in e for e in table["Error"])
    # nothing was started
    assert not any((w / "job.out").exists() for w in run.work_dirs("execute"))


@pytest.mark.slurm
def test_cpu_smoke_run_through_slurm(image_slurm_smoke):
    run, _, table = image_slurm_smoke
    row = table.iloc[0]
    assert row["Status"] == "ok", row.to_dict()
    assert row["Images/s"] > 0 and row["Energy(Wh)"] > 0
    job = (run.work_dirs("execute")[0] / "job.sh").read_text()
    assert "#SBATCH --nodes=1" in job and "\nsrun " in job
