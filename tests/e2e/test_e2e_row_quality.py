"""Doubt in the row: a finished CPU smoke run of the image benchmark, whose
job output and energy summary are then changed at the file boundary to what
a doubtful run leaves (a sensor that vanished, another benchmark on the
host, a run stopped early), and analysed again by the real JUBE."""

from __future__ import annotations

import os
import re

import pytest

from tests.jube_runs import JubeRun

SCRIPT = "image_classification/image_classification_torch_benchmark.xml"
pytestmark = pytest.mark.jube


def _replace(path, pattern, replacement):
    text = path.read_text()
    changed = re.sub(pattern, replacement, text, flags=re.MULTILINE)
    assert changed != text, pattern
    path.write_text(changed)


def test_doubtful_runs_are_flagged_in_the_row(tmp_path):
    run = JubeRun(SCRIPT, tmp_path / "run", env=dict(os.environ))
    run.run("CPU", "smoke")
    execute = run.work_dirs("execute")[0]
    combine = run.work_dirs("combine_energy")[0]
    _replace(combine / "stdout", r"source=\S+", "source=incomplete")
    _replace(combine / "stdout", r"missing_pct=\S+", "missing_pct=88.76")
    _replace(execute / "job.out", r"load=\S+ cpus=\S+ other_benchmarks=\S+",
             "load=7.5 cpus=2 other_benchmarks=3")
    _replace(execute / "job.out", r"^CARAML host at end: .*$",
             "CARAML host at end: load=1.8 cpus=2 other_benchmarks=1")
    _replace(execute / "job.out", r"iterations_total=\d+", "iterations_total=2")
    (run.run_dir / "analyse.xml").unlink(missing_ok=True)  # JUBE reads the files again
    row = run.table().iloc[0]
    flags = row["Flags"].split()
    assert flags == ["energy-incomplete(89%-of-samples-missing)",
                     "busy-host(load-7.5-on-2-CPUs-at-start)",
                     "other-benchmarks-running(3)",
                     "busy-host(load-1.8-on-2-CPUs-at-end)",
                     "other-benchmarks-at-end(1)",
                     "stopped-early(2-of-4-iterations)"], row["Flags"]
    assert row["EnergySource"] == "incomplete(estimate)"
