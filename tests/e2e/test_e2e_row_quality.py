"""Doubt in the row: a finished CPU smoke run of the image benchmark, whose
job output and energy summary are then changed at the file boundary to what
a doubtful run leaves (a sensor that vanished, another benchmark and another
process competing for the host, a run stopped early), decided again by the
row model and analysed again by the real JUBE."""

from __future__ import annotations

import os
import re
import subprocess
import sys

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
    _replace(combine / "jpwr.out", r"source=\S+", "source=incomplete")
    _replace(combine / "jpwr.out", r"missing_pct=\S+", "missing_pct=88.76")
    # jpwr says whether its figure is whole, and what share it covers, whatever its source
    _replace(combine / "jpwr.out", r"complete=\S+", "complete=no")
    _replace(combine / "jpwr.out", r"covered_pct=\S+", "covered_pct=11.24")
    _replace(execute / "job.out", r"^(CARAML provenance: .*)other_benchmarks=\S+", r"\1other_benchmarks=3")
    _replace(execute / "job.out", r"^CARAML host at end: .*$",
             "CARAML host at end: load=1.8 cpus=2 other_benchmarks=1 foreign_cpu_pct=47.0")
    _replace(execute / "job.out", r"iterations_total=\d+", "iterations_total=2")
    # the row model decides again from the changed files and writes the full
    # table anew, as the combine step does
    with open(combine / "stdout", "w") as out:
        subprocess.run([sys.executable, "-m", "caraml.row", "--benchmark", "image", "jpwr.out",
                        "jpwr.err"], cwd=combine, stdout=out, check=True, timeout=120)
    subprocess.run([sys.executable, "-m", "caraml.row.full_table", str(run.run_dir)],
                   stdout=subprocess.DEVNULL, check=True, timeout=120)
    (run.run_dir / "analyse.xml").unlink(missing_ok=True)  # JUBE reads the files again
    row = run.table().iloc[0]
    flags = row["Flags"].split()
    assert flags == ["energy-incomplete(covers-11%-of-the-run-window)",
                     "other-benchmarks-running(3)",
                     "other-benchmarks-at-end(1)",
                     "cpu-contention(47%-of-host-CPU-used-by-other-processes)",
                     "stopped-early(2-of-4-iterations)"], row["Flags"]
    # an estimate is named an estimate first; the flag above says the share it covers
    assert row["EnergySource"] == "estimated(estimate)"
    # a flagged row is listed in the issues table with its flags
    issues = (run.run_dir / "result" / "issues.dat").read_text()
    assert "cpu-contention(47%" in issues
