"""The README's main path on a GPU host: `--tag LOCAL smoke` through the
real JUBE to `jube result`, with the GPU found at run time and its energy
measured by NVML. Selected with `-m gpu`; skipped where torch sees no GPU."""

from __future__ import annotations

import os

import pytest

from tests.gpu_marks import requires_gpu
from tests.jube_runs import JubeRun

pytestmark = [*requires_gpu, pytest.mark.jube]


@pytest.mark.parametrize("script, extra, model_column, model", [
    ("image_classification/image_classification_torch_benchmark.xml", (), "Model", "resnet50"),
    ("llm_training/llm_benchmark_nvidia_amd.yaml", ("synthetic",), "ModelSize", "800M"),
    ("operator_benchmark/fno_benchmark.xml", ("rbc2d",), "Problem", "rbc2d"),
])
def test_local_smoke_runs_on_this_hosts_gpus(tmp_path, script, extra, model_column, model):
    run = JubeRun(script, tmp_path / "run", env=dict(os.environ))
    run.run("LOCAL", "smoke", *extra)
    table = run.table()
    assert (table["Status"] == "ok").all(), table.to_dict("records")
    row = table.iloc[0]
    assert row["System"] == "LOCAL" and row[model_column] == model
    assert row["EnergySource"].startswith("measured(")
