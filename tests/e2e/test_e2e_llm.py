"""The LLM benchmark end to end through the real JUBE: data preparation,
training and energy combination, on this host and through the local Slurm
cluster, with real (local corpus) and with synthetic data."""

from __future__ import annotations

import os

import pandas as pd
import pytest
import torch

from tests.jube_runs import JubeRun

SCRIPT = "llm_training/llm_benchmark_nvidia_amd.yaml"
pytestmark = pytest.mark.jube


def _run(tmp_path, env=None) -> JubeRun:
    return JubeRun(SCRIPT, tmp_path / "run", env={**os.environ, **(env or {})})


def _check_full_row(row, data_prefix: str, git: bool = True) -> None:
    assert row["Status"] == "ok", row.to_dict()
    assert (row["System"], row["Backend"], row["ModelSize"], row["Precision"]) == \
        ("CPU", "torch", "cpu-small", "fp32")
    assert row["Data"].startswith(data_prefix)
    assert (row["TP"], row["PP"], row["DP"], row["Devices"]) == (1, 1, 1, 1)
    assert (row["GlobalBatchSize"], row["SequenceLength"]) == (4, 256)
    # 6 iterations, 2 of them warm-up
    assert row["Iterations"] == 4
    # tokens/s = global batch x sequence length / time per iteration
    assert row["Tokens/s"] == pytest.approx(4 * 256 / row["Time/iteration(s)"], rel=2e-3)
    # hardware FLOPs count recomputed passes (none here); the model's are the MFU basis
    assert row["HardwareTFLOP/s/device(with-recompute)"] >= row["ModelTFLOP/s/device(MFU-basis)"] > 0
    # the energy says its scope, what it divides by, and the timed window's own figure
    assert (row["EnergyScope"], row["EnergyDevices"]) == ("host-estimate", "1xhost-estimate")
    assert row["Tokens/Wh"] == pytest.approx(4 * 4 * 256 / row["TimedEnergy(Wh)"], rel=2e-3)
    assert row["TimedEnergy(Wh)"] < row["Energy(Wh)"]
    # a run from a copy without git's files names no commit
    assert len(row["Commit"]) >= 12 if git else pd.isna(row["Commit"]), row["Commit"]
    assert row["Torch"].startswith(torch.__version__)
    # the measured matmul rate divides, or (a host too busy to measure it) the row says why not
    if row["MFU"] == row["MFU"]:
        assert 0 < row["MFU"] < 1 and row["PeakSource"] == "measured-matmul"
    else:
        assert "mfu-not-available(" in row["Flags"], row.to_dict()
    assert row["EnergySource"] == "estimated(estimate)"
    # the whole loop's figure counts every token of the measured window, warm-up included
    assert row["RunTokens/Wh"] == pytest.approx(6 * 4 * 256 / row["Energy(Wh)"], rel=2e-3)


def test_cpu_smoke_run_on_a_local_corpus(llm_cpu_smoke):
    table = llm_cpu_smoke.table()
    assert len(table) == 1, table
    # a plain `jube result` shows the two short tables; the full one is the CSV file's
    assert llm_cpu_smoke.shown_tables() == ["result", "issues"]
    _check_full_row(table.iloc[0], "local-pydoc")


def test_cpu_smoke_run_on_synthetic_data(tmp_path):
    run = _run(tmp_path)
    run.run("CPU", "smoke", "synthetic")
    _check_full_row(run.table().iloc[0], "synthetic")


def test_a_corpus_that_does_not_exist_gives_a_failed_row(tmp_path):
    run = _run(tmp_path, env={"CARAML_LLM_CORPUS": str(tmp_path / "no_such_corpus.jsonl")})
    run.run("CPU", "smoke")
    row = run.table().iloc[0]
    assert row["Status"] == "failed"
    assert "no_such_corpus.jsonl" in row["Error"]


def test_a_model_size_the_host_cannot_run_gives_a_failed_row_that_says_why(tmp_path):
    # 800M trains in fp16, which needs a GPU
    run = _run(tmp_path)
    run.run("CPU", "smoke", "800M", "synthetic")
    row = run.table().iloc[0]
    assert row["Status"] == "failed"
    assert "fp16" in row["Error"]


@pytest.mark.slurm
def test_cpu_smoke_run_through_slurm(main_command_through_slurm, slurm):
    # the main command's run (tests/conftest.py), which the tests of following it read too
    table = main_command_through_slurm.run_of("llm").after_slurm(slurm)
    assert len(table) == 1, table
    _check_full_row(table.iloc[0], "local-pydoc", git=False)
