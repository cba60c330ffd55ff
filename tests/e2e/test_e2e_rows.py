"""The row model end to end, through the real JUBE: a CPU run of the image
benchmark, its default table within 160 characters, its rows in the results
history (typed), and the README's main command (caraml/login/rows.py), the JUBE
tables and row.json agreeing on a run stopped early and on a run whose
combine step failed after the job had run."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from tests.jube_runs import ROOT, JubeRun

SCRIPT = "image_classification/image_classification_torch_benchmark.xml"
pytestmark = pytest.mark.jube


@pytest.fixture
def run(image_cpu_smoke):
    """The session's CPU run, for the tests that only read it."""
    return image_cpu_smoke


@pytest.fixture(scope="module")
def own_run(tmp_path_factory):
    """A CPU run of this module's own, for the tests that change its files."""
    run = JubeRun(SCRIPT, tmp_path_factory.mktemp("rows") / "run", env=dict(os.environ))
    run.run("CPU", "smoke")
    return run


def main_command(run) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "caraml.login.rows", str(run.run_dir)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def row_json(run) -> dict:
    [path] = run.run_dir.glob("*_combine_energy/work/row.json")
    return json.loads(path.read_text())


def test_the_default_table_fits_160_columns_and_says_what_decides(run):
    run.table()
    lines = (run.run_dir / "result" / "result.dat").read_text().splitlines()
    assert max(map(len, lines)) <= 160, "\n".join(lines)
    assert lines[0] == "result:"
    lines = lines[1:]
    titles = [t.strip() for t in lines[0].strip("|").split("|")]
    assert titles == ["System", "Model", "Px", "Prec", "NxDev", "Batch", "Images/s", "Img/s/dev",
                      "Limit(W)", "W/dev", "Images/Wh", "EnergyScope", "Energy", "Status"]
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    # a smoke run times too little to be a measurement, and its Status says which rule
    assert cells[-1] == "ok (short)" and cells[4] == "1x1" and cells[-2] == "estimated"
    assert float(cells[6]) > 0 and float(cells[9]) > 0


def test_images_per_wh_is_one_number_in_the_table_the_csv_and_the_history(run, history_file):
    """One meaning per name: the timed window's images per Wh, whichever
    table shows it; the whole loop's figure has a name of its own."""
    csv = run.table().iloc[0]
    lines = (run.run_dir / "result" / "result.dat").read_text().splitlines()[1:]
    titles = [t.strip() for t in lines[0].strip("|").split("|")]
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    shown = float(cells[titles.index("Images/Wh")])
    with sqlite3.connect(history_file) as db:
        [(stored, run_figure)] = db.execute(
            "select work_per_wh_timed, work_per_wh_run from history where run_dir = ?",
            (str(run.run_dir),)).fetchall()
    assert shown == pytest.approx(csv["Images/Wh"], rel=1e-3)
    assert float(stored) == pytest.approx(csv["Images/Wh"], rel=1e-3)
    assert csv["Images/Wh"] == pytest.approx(3 * 8 / csv["TimedEnergy(Wh)"], rel=2e-3)
    assert float(run_figure) == pytest.approx(csv["RunImages/Wh"], rel=1e-3)
    assert "TimedImages/Wh" not in csv.index


def test_every_row_of_the_run_is_in_the_results_history(run, history_file):
    table = run.table()
    with sqlite3.connect(history_file) as db:
        rows = db.execute("select state, per_s, typeof(per_s), system_name from history "
                          "where run_dir = ?", (str(run.run_dir),)).fetchall()
    assert len(rows) == len(table) == 1
    assert rows[0][0] == "ok" and rows[0][1] > 0 and rows[0][2:] == ("real", "CPU")


def test_a_run_stopped_early_is_a_measurement_everywhere(own_run):
    run = own_run
    [execute] = run.work_dirs("execute")
    job_out = execute / "job.out"
    job_out.write_text(job_out.read_text().replace("CARAML stop: iteration count 4 reached",
                                                   "CARAML stop: signal SIGUSR1"))
    run.combine_again(execute)
    row = run.table().iloc[0]
    stored = row_json(run)
    # a smoke run cut short: the cause says both, the stop and the verdict
    assert row["Status"] == "ok-stopped-early"
    assert row["Error"].startswith("signal SIGUSR1; not a measurement (3 timed iterations in ")
    assert (stored["state"], stored["reason"]) == ("ok-stopped-early", "signal SIGUSR1")
    assert stored["per_s"] > 0
    done = main_command(run)
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_a_combine_step_that_fails_after_the_job_gives_a_failed_row_everywhere(own_run):
    run = own_run
    [execute] = run.work_dirs("execute")
    # every energy file damaged: jpwr combine has nothing it can read
    for path in (execute / "energy").iterdir():
        path.write_text("not a jpwr file\n")
    run.combine_again(execute)
    row = run.table().iloc[0]
    stored = row_json(run)
    assert row["Status"] == stored["state"] == "failed"
    assert "jpwr combine exited with status 1" in row["Error"]
    assert "no jpwr energy or power data found" in stored["reason"]
    assert stored["energy_scope"] is None and stored["per_s"] is None
    done = main_command(run)
    assert done.returncode == 1
    assert "failed: energy not combined (jpwr combine exited with status 1)" in done.stderr
