"""A row from ReFrame and a row from JUBE are one row model's decision on
the same evidence: the files a JUBE job left, decided outside JUBE by
caraml.row.standalone (as a ReFrame check does) with the work package's
parameters, give the row JUBE's combine step wrote."""

from __future__ import annotations

import json
import shutil

import pytest

from caraml import jube_run
from caraml.job.node_energy import FILE_NAME as NODE_ENERGY_FILE
from caraml.row.standalone import main as row_main

pytestmark = pytest.mark.jube


def test_the_standalone_row_of_a_jube_job_is_the_row_jube_decided(image_cpu_smoke, tmp_path):
    run = image_cpu_smoke
    run.table()
    [execute] = run.work_dirs("execute")
    [combine] = run.work_dirs("combine_energy")
    jube_row = json.loads((combine / "row.json").read_text())
    stage = tmp_path / "stage"
    stage.mkdir()
    # the files a job leaves that the row reads: its outputs and its node energy
    for name in ("job.out", "job.err", NODE_ENERGY_FILE):
        shutil.copy(execute / name, stage / name)
    shutil.copytree(execute / "energy", stage / "energy")
    params = jube_run.work_packages(run.run_dir)[jube_run.work_package_id(execute)].params
    (stage / "params.json").write_text(json.dumps(params))
    assert row_main(["--benchmark", "image", "--params", str(stage / "params.json"), str(stage)]) == 0
    row = json.loads((stage / "row.json").read_text())
    assert jube_row["state"] == "ok"
    for decided in (row, jube_row):
        decided.pop("work_package")
    assert row == jube_row
