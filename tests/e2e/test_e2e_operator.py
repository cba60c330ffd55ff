"""The operator (FNO) benchmark end to end through the real JUBE on this
host, as a user runs it: a CPU smoke run gives ok rows with samples/s and
estimated Wh in every table (the short one within 160 characters, the full
CSV, row.json, the results history), and bad tags give failed rows that say
why before anything trains."""

from __future__ import annotations

import json
import os
import sqlite3

import pandas as pd
import pytest

from tests.jube_runs import JubeRun

SCRIPT = "operator_benchmark/fno_benchmark.xml"
pytestmark = pytest.mark.jube


def _run(tmp_path) -> JubeRun:
    # generated data, if a test trains on it, is cached in the test's folder
    env = {**os.environ, "CARAML_OPERATOR_CACHE": str(tmp_path / "cache")}
    return JubeRun(SCRIPT, tmp_path / "run", env=env)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> JubeRun:
    run = _run(tmp_path_factory.mktemp("operator"))
    run.run("CPU", "smoke")
    return run


def test_cpu_smoke_gives_ok_rows_with_samples_per_second_and_energy(smoke):
    table = smoke.table().set_index("Problem")
    # no problem tag: the default problems, CPU-sized on a host without accelerators
    assert sorted(table.index) == ["rbc2d-small", "rbc3d-small"]
    for problem, row in table.iterrows():
        assert row["Status"] == "ok", row.to_dict()
        assert (row["Model"], row["Compile"], row["Data"], row["Precision"]) == (
            f"FNO_{problem}", "none", "synthetic", "fp32")
        assert (row["GlobalBatchSize"], row["BatchSize/device"], row["Devices"]) == (4, 4, 1)
        assert row["Samples/s"] > 0
        assert row["Samples/s/device"] == pytest.approx(row["Samples/s"], rel=1e-3)
        # an epoch of the driver's 1024 synthetic samples at the measured rate
        assert row["SamplesPerEpoch"] == 1024
        assert row["Epoch(s)"] == pytest.approx(1024 / row["Samples/s"], rel=2e-3)
        # no power sensor here: estimated, and the table says so
        assert row["EnergySource"] == "estimated(estimate)"
        assert row["EnergyScope"] == "host-estimate" and row["Energy(Wh)"] > 0
        # every sample the measured loop saw (4 iterations of 4), and the 3 timed ones
        assert row["RunSamples/Wh"] == pytest.approx(4 * 4 / row["Energy(Wh)"], rel=2e-3)
        assert row["Samples/Wh"] == pytest.approx(3 * 4 / row["TimedEnergy(Wh)"], rel=2e-3)
        # the FLOP count says what it leaves out
        assert row["CountedFLOP/sample"] > 0 and "fft" in row["FLOPNote"]


def test_row_json_is_an_operator_row_of_the_problem(smoke):
    rows = [json.loads(p.read_text()) for p in smoke.run_dir.glob("*_combine_energy/work/row.json")]
    assert sorted(r["model"] for r in rows) == ["FNO rbc2d-small", "FNO rbc3d-small"]
    for row in rows:
        assert row["benchmark"] == "operator" and row["state"] == "ok"
        assert row["unit"] == "samples" and row["per_s"] > 0
        assert row["compile"] == "none" and row["backend"] == "neuraloperator"
        assert row["energy_estimated"] and row["energy_window"] == "timed"


def test_the_short_table_fits_160_columns_and_the_history_holds_the_rows(smoke, history_file):
    smoke.table()
    # a plain `jube result` shows the two short tables; the full one is the CSV file's
    assert smoke.shown_tables() == ["result", "issues"]
    lines = (smoke.run_dir / "result" / "result.dat").read_text().splitlines()
    assert max(map(len, lines)) <= 160, "\n".join(lines)
    assert lines[0] == "result:"
    titles = [t.strip() for t in lines[1].strip("|").split("|")]
    assert titles == ["System", "Problem", "Prec", "Compile", "NxDev", "Batch", "Samples/s",
                      "Smp/s/dev", "Limit(W)", "W/dev", "Samples/Wh", "EnergyScope", "Energy", "Status"]
    cells = [c.strip() for c in lines[3].strip("|").split("|")]
    # a smoke row ran and is no measurement: its Status says so, as the issues table does
    assert (cells[1], cells[-1], cells[-2]) == ("rbc2d-small", "ok (short)", "estimated")
    with sqlite3.connect(history_file) as db:
        stored = db.execute("select model, state, per_s from history where run_dir = ?",
                            (str(smoke.run_dir),)).fetchall()
    assert sorted(p for p, _, _ in stored) == ["FNO rbc2d-small", "FNO rbc3d-small"]
    assert all(status == "ok" and isinstance(rate, float) and rate > 0 for _, status, rate in stored)


@pytest.mark.parametrize("tags, message", [
    (("CPU", "smoke", "rbc4d"), "unknown tag rbc4d"),
    (("CPU", "smoke", "compile", "autotune"), "tags compile and autotune exclude each other"),
    (("GC200", "smoke"), "GC200 (ipu devices) is not run by fno_benchmark.xml"),
])
def test_bad_tags_give_failed_rows_that_say_why(tmp_path, tags, message):
    run = _run(tmp_path)
    run.run(*tags)
    table = run.table()
    assert len(table) == 2 and set(table["Status"]) == {"failed"}
    assert all(message in cause for cause in table["Error"]), table["Error"].tolist()
    assert table["Samples/s"].isna().all()
    # nothing was started
    assert not any((w / "job.out").exists() for w in run.work_dirs("execute"))


def test_problem_compile_and_precision_tags_choose_the_work_packages(tmp_path):
    run = _run(tmp_path)
    run.run("CPU", "dryrun", "pic1d", "navier_stokes2d", "autotune", "precision")
    table = run.table()
    assert set(table["Status"]) == {"dry-run"}
    chosen = sorted(zip(table["Problem"], table["Precision"], table["Compile"]))
    assert chosen == [(p, prec, "max-autotune") for p in ("navier_stokes2d-small", "pic1d-small")
                      for prec in ("bf16", "fp32")]
    for work in run.work_dirs("execute"):
        command = (work / "job.sh").read_text()
        assert "-m operator_benchmark.fno_training --problem " in command
        assert "--compile max-autotune " in command
    assert pd.isna(table["Samples/s"]).all()


@pytest.mark.slurm
def test_cpu_smoke_run_through_slurm(main_command_through_slurm, slurm):
    # the main command's run (tests/conftest.py): its two default problems
    run = main_command_through_slurm.run_of("operator")
    table = run.after_slurm(slurm)
    assert sorted(table["Problem"]) == ["rbc2d-small", "rbc3d-small"], table.to_dict("records")
    assert (table["Status"] == "ok").all() and (table["Samples/s"] > 0).all(), table.to_dict("records")
    assert (table["Energy(Wh)"] > 0).all()
    for work in run.work_dirs("execute"):
        job = (work / "job.sh").read_text()
        assert "#SBATCH --nodes=1" in job and "\nsrun " in job
