"""A fourth benchmark without a change to a core file (docs/adding_a_benchmark.md):
the tiny MLP of tests/tiny_benchmark/, registered by its entry's path in
CARAML_BENCHMARKS, with a data step and columns of its own, run with the
repeat tag, gets a row for each repeat through the real JUBE and the row
model (its data step's values in its own columns of the full table and of
JUBE's short table), JUBE's own mean and spread over the repeats in the
repeats table, a line in caraml-compare's comparison and a ReFrame check
whose job and data step JUBE plans."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from caraml import benchmarks, repeats
from caraml.regression.plan import plan, prepare_data
from caraml.row import render
from caraml.row.run import rows_of_run
from tests.jube_runs import ROOT, JubeRun

ENTRY = ROOT / "tests" / "tiny_benchmark" / "entry.py"
# what a site's benchmark leaves alone: the suite's own files
CORE = ("caraml", "aux", "regression", "platform.xml", "README.md", "llm_training",
        "image_classification", "operator_benchmark", "jpwr")


# the runs of each configuration the repeat tag makes here
REPEATS = 2


@pytest.fixture(scope="module")
def env():
    return {**os.environ, benchmarks.REGISTRY_ENV: str(ENTRY), "PYTHONPATH": str(ROOT),
            repeats.ENV: str(REPEATS)}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, env):
    run = JubeRun("tests/tiny_benchmark.xml", tmp_path_factory.mktemp("tiny") / "run", env=env)
    run.run("CPU", "smoke", "repeat")
    return run


def _pretty(shown: str, name: str) -> list[dict[str, str]]:
    """One table of what `jube result` printed, its lines as {title: cell}."""
    lines = shown.split(f"{name}:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    titles = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [dict(zip(titles, (cell.strip() for cell in line.strip("|").split("|")))) for line in lines[2:]]


@pytest.mark.jube
def test_the_tiny_benchmark_gets_a_jube_row_for_each_repeat(tiny):
    table = tiny.table()
    assert list(table["Status"]) == ["ok"] * REPEATS and sorted(table["Repeat"]) == [1, 2], table.to_string()
    assert (table["Samples/s"] > 0).all() and (table["Iterations"] == 3).all()
    # its data step's values in its own columns; the driver trained on what the step handed it
    assert set(zip(table["Data"], table["Features"])) == {("random-vectors", 12)}
    rows = [json.loads(path.read_text()) for path in tiny.run_dir.glob("*_combine_energy/work/row.json")]
    assert sorted(row["repeat"] for row in rows) == [1, 2]
    for row in rows:
        assert (row["benchmark"], row["model"], row["unit"]) == ("tiny", "mlp", "samples")
        assert row["details"] == {"data": "random-vectors", "features": "12"}
        assert row["work_per_wh_timed"] > 0  # samples/Wh of the timed iterations
        assert row["global_batch"] == 8 and row["state"] == "ok"
        # three timed iterations: a row whose job ran as planned, and no measurement
        assert not row["measurement"] and row["not_a_measurement"].startswith("3 timed iterations in ")
    assert "features=12" in next(tiny.run_dir.glob("*_execute/work/job.out")).read_text()
    # JUBE's short table: its own column Features (the docs' row_own2) and
    # a Status that says the rows are no measurement, as the verdict does
    result = _pretty(tiny.shown, "result")
    assert [(line["Features"], line["Status"]) for line in result] == [("12", "ok (short)")] * REPEATS
    assert sorted(float(line["Samples/s"]) for line in result) == pytest.approx(
        sorted(table["Samples/s"]), rel=1e-4)


@pytest.mark.jube
def test_jubes_own_statistics_over_the_repeats_are_the_repeats_table(tiny):
    """`jube result` with the repeat tag: one line per configuration with
    JUBE's _cnt, _avg, _std, _min and _max of the typed patterns over every
    repeat's row (caraml/row/repeat_group.py)."""
    tiny.table()
    [line] = _pretty(tiny.shown, "repeats")
    rates = [json.loads(p.read_text())["per_s"] for p in tiny.run_dir.glob("*_combine_energy/work/row.json")]
    assert (line["Runs"], line["Meas"], line["Features"]) == (str(REPEATS), "0", "12")
    # the row line holds the rate to five digits or whole: JUBE's mean and spread of those
    shown = [float(render._word("per_s", rate)) for rate in rates]
    assert float(line["Samples/s"]) == pytest.approx(statistics.mean(shown), abs=0.06)
    assert float(line["sd"]) == pytest.approx(statistics.stdev(shown), abs=0.06)
    assert (float(line["min"]), float(line["max"])) == pytest.approx((min(shown), max(shown)), abs=0.06)
    # a second jube result reads JUBE's typed record of the analysis back; no line over 160 characters
    assert tiny.jube("result", str(tiny.outpath), "-i", "last") == tiny.shown
    assert tiny.shown_tables() == ["result", "repeats"]


@pytest.mark.jube
def test_the_tiny_benchmark_is_a_line_of_the_comparison(tiny, env, tmp_path):
    done = subprocess.run([sys.executable, "-m", "caraml.compare.cli", f"CPU={tiny.outpath}",
                           "--out", str(tmp_path / "cmp"), "--no-references"],
                          env=env, capture_output=True, text=True, timeout=600)
    # its three timed iterations are a smoke run: shown, marked, and no measurement (exit 1)
    assert done.returncode == 1, done.stderr[-2000:]
    assert (f"failed benchmark: CPU tiny: no measured row ({REPEATS} rows: not a measurement (3 timed "
            "iterations in ") in done.stdout
    table = pd.read_csv(tmp_path / "cmp" / "comparison.csv")
    assert [(line["benchmark"], line["unit"], line["state"]) for line in table.to_dict("records")] == \
        [("tiny", "samples", "ok")] * REPEATS
    # a smoke run is never extrapolated to a time to solution
    assert "tiny" not in (tmp_path / "cmp" / "time_to_solution.csv").read_text()


@pytest.mark.jube
def test_the_tiny_benchmark_is_a_reframe_check_whose_job_jube_plans(env, tmp_path):
    listed = subprocess.run([str(Path(sys.executable).with_name("reframe")),
                             "-C", str(ROOT / "regression" / "config.py"),
                             "-c", str(ROOT / "regression" / "checks" / "caraml_checks.py"), "-l"],
                            cwd=tmp_path, env={
                                 **env, "RFM_REPORT_FILE": str(tmp_path / "report.json")},
                            capture_output=True, text=True, timeout=300)
    # one test class per benchmark of the table (its own perflog)
    checks = [ln.split()[1:4] for ln in listed.stdout.splitlines() if "Caraml_" in ln]
    assert ["Caraml_tiny", "%configuration=smoke", "%benchmark=tiny"] in checks, listed.stdout
    planned = plan(benchmarks.get("tiny", env), ["CPU", "smoke"], tmp_path, environ=env)
    assert "-m tests.tiny_benchmark.driver @prepare_data/data.args" in planned.job_script.read_text()
    assert planned.params["row_benchmark"] == "tiny"
    # its data step, the JUBE script's own command, run where ReFrame's check runs it
    assert planned.prepare[-6:] == ["-m", "tests.tiny_benchmark.data", "--features", "12",
                                    "--driver-args-file", "data.args"]
    prepare_data(planned)
    assert (planned.data_folder / "data.args").read_text() == "--features\n12\n"


def test_no_core_file_names_the_tiny_benchmark():
    named = subprocess.run(["git", "grep", "-l", "-i", "tiny_benchmark\\|tests/tiny", "--", *CORE],
                           cwd=ROOT, capture_output=True, text=True)
    assert named.stdout == ""


@pytest.mark.jube
def test_a_registry_that_fails_as_it_is_read_is_the_rows_cause_under_jube_run(tmp_path):
    broken = tmp_path / "site_benchmark.py"
    broken.write_text("raise RuntimeError('site module broken')\n")
    run = JubeRun("tests/tiny_benchmark.xml", tmp_path / "run",
                  env={**os.environ, benchmarks.REGISTRY_ENV: str(broken), "PYTHONPATH": str(ROOT)})
    run.run("CPU", "smoke")
    # the tiny benchmark's script has no full table: its row as the row model decided it under jube run
    [row] = rows_of_run(run.run_dir)
    assert row.state == "failed", row
    assert (f"CARAML_BENCHMARKS names {broken}, which fails as it is read (RuntimeError: site module "
            "broken): fix the file or take it out of CARAML_BENCHMARKS") in row.reason, row.reason
