"""The results history end to end, through the real JUBE: two CPU runs of
the image benchmark into one outpath, the first run folder moved aside in
between (so the second run gets the same id, 000000), keep both runs' rows
in the history with numeric types, each under its own run key, and
`caraml-compare --history` draws both; the checkout's own history is not
touched."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from caraml.row import history
from tests.jube_runs import ROOT, JubeRun

pytestmark = pytest.mark.jube
SCRIPT = "image_classification/image_classification_torch_benchmark.xml"
COMMAND = Path(sys.executable).parent / "caraml-compare"


def _checkout_history() -> tuple[bool, float]:
    path = ROOT / "results" / "caraml_rows.sqlite"
    return path.exists(), path.stat().st_mtime if path.exists() else 0.0


def test_two_runs_of_one_id_both_stay_in_the_history_and_are_drawn(tmp_path, monkeypatch):
    db = tmp_path / "history.sqlite"
    monkeypatch.setenv(history.ENV, str(db))
    checkout_before = _checkout_history()
    run = JubeRun(SCRIPT, tmp_path / "run", env=dict(os.environ))
    run.run("CPU", "smoke")
    first = run.table()
    shutil.move(run.run_dir, tmp_path / "aside")
    run.run("CPU", "smoke")
    second = run.table()
    assert run.run_dir.name == "000000" and len(first) == len(second) == 1

    with sqlite3.connect(db) as con:
        lines = con.execute("select run_uuid, run_dir, state, typeof(per_s), per_s, typeof(global_batch), "
                            "typeof(timed_iterations) from history order by row_id").fetchall()
    assert len(lines) == 2 and lines[0][0] != lines[1][0]
    assert lines[0][1] == lines[1][1] == str(run.run_dir)
    assert [line[2:4] for line in lines] == [("ok", "real"), ("ok", "real")]
    assert all(line[4] > 0 and line[5:] == ("integer", "integer") for line in lines)
    assert _checkout_history() == checkout_before

    out = tmp_path / "out"
    proc = subprocess.run([str(COMMAND), "--history", str(db), "--out", str(out), "--no-references"],
                          text=True, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # CPU smoke runs are not measurements: both are drawn (hollow) and listed with their run keys
    page = (out / "history.html").read_text()
    section = page.split('id="not-measured"')[1]
    assert all(uuid in section for uuid, *_ in lines)
    points = pd.read_csv(out / "history.csv")
    assert sorted(points["run_uuid"]) == sorted(uuid for uuid, *_ in lines)
    assert set(points["verdict"]) == {"not a measurement"} and page.count("data:image/png") == 1
