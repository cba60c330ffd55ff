"""The LOCAL system end to end through the real JUBE: on this host, which
has no accelerator, LOCAL runs what CPU runs; a host whose NVIDIA driver is
broken, or a job that asks for more devices than the host has, gives a
failed row that names the problem (a fake nvidia-smi on PATH stands in for
the driver)."""

from __future__ import annotations

import os
import stat

import pytest

from tests.jube_runs import JubeRun

IC = "image_classification/image_classification_torch_benchmark.xml"
LLM = "llm_training/llm_benchmark_nvidia_amd.yaml"
pytestmark = pytest.mark.jube


def _run(tmp_path, script, **env) -> JubeRun:
    return JubeRun(script, tmp_path / "run", env={**os.environ, **env})


def test_local_without_accelerators_runs_the_cpu_image_benchmark(tmp_path):
    run = _run(tmp_path, IC)
    run.run("LOCAL", "smoke")
    row = run.table().iloc[0]
    assert row["Status"] == "ok", row.to_dict()
    assert (row["System"], row["Model"], row["Precision"], row["Devices"]) == \
        ("LOCAL", "resnet18", "fp32", 1)
    assert row["Images/s"] > 0


def test_local_without_accelerators_runs_the_cpu_llm_benchmark(tmp_path):
    run = _run(tmp_path, LLM)
    run.run("LOCAL", "smoke", "synthetic")
    row = run.table().iloc[0]
    assert row["Status"] == "ok", row.to_dict()
    assert (row["System"], row["Backend"], row["ModelSize"], row["Devices"]) == \
        ("LOCAL", "torch", "cpu-small", 1)
    # no accelerator whose datasheet the table knows: the host's measured rate,
    # or (a host too busy to measure it) the row says why there is no MFU
    if row["MFU"] == row["MFU"]:
        assert 0 < row["MFU"] < 1 and row["PeakSource"] == "measured-matmul"
    else:
        assert "mfu-not-available(" in row["Flags"], row.to_dict()


def test_a_broken_nvidia_driver_fails_the_row_before_training(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    smi = fake / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate "
                   "with the NVIDIA driver. Make sure it runs.'\nexit 9\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    run = _run(tmp_path, LLM, PATH=f"{fake}{os.pathsep}{os.environ['PATH']}")
    run.run("LOCAL", "smoke", "synthetic")
    row = run.table().iloc[0]
    assert row["Status"] == "failed"
    assert "nvidia-smi fails" in row["Error"] and "NVIDIA driver" in row["Error"]
    assert not list(run.run_dir.glob("*_execute/work/job.out"))  # nothing was started


def test_more_devices_than_the_host_has_is_a_failed_row_with_both_numbers(tmp_path):
    run = _run(tmp_path, IC, CARAML_LOCAL_DEVICES="2")
    run.run("LOCAL", "smoke")
    row = run.table().iloc[0]
    assert row["Status"] == "failed"
    assert "asks for 2 devices" in row["Error"] and "at most 1" in row["Error"]
