"""The results history (caraml/row/history.py) and its page (caraml-compare
--history): typed columns with NULL for a missing value, one key per run
(UUID and host) that survives moving or deleting the run folder, nothing
overwritten or dropped, a history that cannot be written costs one line and
never the row; the page draws each system's runs and flags a point below
its reference band."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3

import pandas as pd
import pytest

from caraml import jube_run
from caraml.compare import comparison
from caraml.row import history, row_json
from tests.compare import rowfixtures as fx


@pytest.fixture
def db(tmp_path, monkeypatch):
    """A history of this test's rows alone."""
    path = tmp_path / "history.sqlite"
    monkeypatch.setenv(history.ENV, str(path))
    return path


def _record(root, name, row, run_id=0):
    """row written as the row model writes it into outpath root/name, then recorded; its run folder."""
    outpath = fx.write_run(root, name, [row], run_id=run_id)
    run = outpath / f"{run_id:06d}"
    (run / jube_run.RECORD).write_text("<jube/>\n")
    work = run / "000000_execute" / "work"
    history.record(row_json.read(work / "row.json"), work)
    return run


def _lines(db, sql="select * from history"):
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql)]
    finally:
        con.close()


def test_numbers_are_typed_and_a_missing_value_is_null(tmp_path, db):
    _record(tmp_path, "a", fx.a100())
    [line] = _lines(db, "select typeof(per_s) p, typeof(global_batch) b, typeof(nodes) n, "
                                  "typeof(energy_estimated) e, typeof(reason) r, typeof(image_size) i, "
                                  "global_batch, per_s from history")
    assert (line["p"], line["b"], line["n"], line["e"]) == ("real", "integer", "integer", "integer")
    assert (line["r"], line["i"]) == ("null", "null")  # reason '' and image_size None: NULL, never ''
    assert (line["global_batch"], line["per_s"]) == (512, 77560.0)
    # ordering by batch is numeric, and max() is the largest batch
    for batch in (1024, 128, 16, 2048):
        _record(tmp_path / str(batch), "a", fx.a100(global_batch=batch))
    assert _lines(db, "select max(global_batch) m from history")[0]["m"] == 2048


def test_a_run_folder_moved_aside_keeps_its_rows_and_the_next_run_of_its_id_gets_its_own(tmp_path,
                                                                                        db):
    first = _record(tmp_path, "cpu", fx.cpu_matmul(per_s_per_device=3690.0))
    key = (first / history.RUN_KEY_FILE).read_text().strip()
    shutil.move(first, tmp_path / "aside")
    second = _record(tmp_path, "cpu", fx.cpu_matmul(per_s_per_device=3270.0))
    assert second == first  # the same run folder name, 000000, again
    shutil.rmtree(tmp_path / "aside")  # deleting the first run's folder loses nothing either
    lines = _lines(db, "select run_uuid, host, run_dir, per_s from history where system_name = 'CPU'")
    assert [line["per_s"] for line in lines] == [3690.0, 3270.0]
    assert lines[0]["run_uuid"] == key != lines[1]["run_uuid"]
    assert lines[0]["run_dir"] == lines[1]["run_dir"] == str(first) and lines[0]["host"]


def test_the_same_row_recorded_twice_is_kept_twice(tmp_path, db):
    run = _record(tmp_path, "a", fx.a100())
    work = run / "000000_execute" / "work"
    history.record(row_json.read(work / "row.json"), work)
    assert len(_lines(db)) == 2


def test_an_older_history_gains_new_columns_filled_from_its_rows_and_keeps_its_own(tmp_path, monkeypatch):
    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE history (row_id INTEGER PRIMARY KEY AUTOINCREMENT, run_uuid TEXT NOT NULL, "
                "host TEXT NOT NULL, run_dir TEXT, recorded_at TEXT NOT NULL, row_json TEXT NOT NULL, "
                "status TEXT, timed_work_per_wh REAL)")
    # a row recorded before (schema caraml-row/1), and a line whose row cannot be read
    old = fx.a100(per_s_per_device=19000.0)
    con.execute("INSERT INTO history (run_uuid, host, recorded_at, row_json, status, timed_work_per_wh) "
                "VALUES ('u', 'h', '2026-01-01', ?, 'ok', 1.5)", [json.dumps(old)])
    con.execute("INSERT INTO history (run_uuid, host, recorded_at, row_json) "
                "VALUES ('v', 'h', '2026-01-02', '{}')")
    con.commit()
    con.close()
    monkeypatch.setenv(history.ENV, str(db))
    _record(tmp_path, "a", fx.a100())
    lines = _lines(db, "select status, timed_work_per_wh, state, per_s, measurement "
                       "from history order by row_id")
    # the old columns stay as they were; the record's columns hold the old line's row too
    assert [tuple(line.values()) for line in lines] == [("ok", 1.5, "ok", 76000.0, 1), (None,) * 5,
                                                        (None, None, "ok", 77560.0, 1)]


def test_only_rows_of_real_runs_are_kept_a_dry_run_and_a_job_not_ended_are_not(tmp_path, db):
    work = _record(tmp_path, "a", fx.a100()) / "000000_execute" / "work"
    row = row_json.read(work / "row.json")
    history.record(dataclasses.replace(row, state="failed", reason="CUDA out of memory"), work)
    for state in ("dry-run", "queued", "pending", "running"):
        history.record(dataclasses.replace(row, state=state, reason=""), work)
    # a ReFrame check's planning is a dry run of the JUBE script: a refusal there is no failed run
    history.record(dataclasses.replace(row, state="failed", reason="unknown tag A200", dry_run=True), work)
    states = _lines(db, "select state from history order by row_id")
    assert [line["state"] for line in states] == ["ok", "failed"]


def test_a_history_that_cannot_be_written_costs_one_line_not_the_row(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(history.ENV, str(blocker / "caraml_rows.sqlite"))  # below a file: no folder
    run = _record(tmp_path, "a", fx.a100())
    err = capsys.readouterr().err
    assert err.startswith(f"CARAML ERROR: {blocker}/caraml_rows.sqlite: the row is in row.json but not in "
                          "the history") and err.count("\n") == 1
    assert (run / "000000_execute" / "work" / "row.json").is_file()


def _dated(row_maker, value, day, commit, **changes):
    return row_maker(per_s_per_device=value, provenance={"date": f"2026-11-{day:02d}T05:00:00+00:00",
                                                         "commit": commit}, **changes)


def test_the_history_page_draws_each_systems_runs_and_flags_a_drop_below_its_band(tmp_path, db,
                                                                                  capsys):
    for i, (value, day, commit) in enumerate([(19000.0, 20, "aaa1111"), (15000.0, 24, "ccc3333")]):
        _record(tmp_path / f"a{i}", "a100", _dated(fx.a100, value, day, commit))
        _record(tmp_path / f"g{i}", "gh200", _dated(fx.gh200, 47000.0 + i, day, commit))
    _record(tmp_path / "s", "mi300x", _dated(fx.smoke, 41500.0, 24, "ccc3333"))
    out = tmp_path / "out"
    # the A100's latest point (15 000 < 0.85 x 19 390) ends its series below the published band
    assert fx.compare(["--history", str(db), "--out", str(out)]) == comparison.BELOW_BAND
    printed = capsys.readouterr().out
    assert "BELOW BAND: A100 llm 800M bf16 seq 2048: 15,000 tokens/s per GPU on 2026-11-24 (commit " \
           "ccc3333" in printed
    # and against its own earlier run: 21 % below 19,000, beyond the 5 % a healthy system varies by
    assert ("DROP: A100 21 % below its run of 2026-11-20 (llm 800M bf16 seq 2048: 15,000 tokens/s per GPU "
            "on 2026-11-24, commit ccc3333") in printed
    assert "GH200" not in printed.split("DROP:")[1]
    points = pd.read_csv(out / "history.csv")
    assert points.groupby("system")["per_s_per_device"].apply(list).to_dict() == {
        "A100": [19000.0, 15000.0], "GH200": [47000.0, 47001.0], "MI300X": [41500.0]}
    assert points["run_uuid"].nunique() == 5
    # trend.series computes which point is below its band; the chart rings what it says
    assert points.loc[points["below"], ["system", "per_s_per_device"]].values.tolist() == [["A100", 15000.0]]
    page = (out / "history.html").read_text()
    assert page.count('src="data:image/png;base64,') == 1 and "history_llm_800M_bf16_seq_2048" in page
    # the smoke run is drawn and listed, marked, and never checked against a band
    assert points.set_index("system").loc["MI300X", "verdict"] == "not a measurement"
    assert "MI300X" in page.split('id="not-measured"')[1]
    # without bands the A100's drop against its own earlier run is what is left
    assert fx.compare(["--history", str(db), "--out", str(tmp_path / "o2"), "--no-references"]) == \
        comparison.DROPPED


def test_the_history_draws_a_sweeps_default_limit_row_and_not_its_capped_points(tmp_path, db):
    run = fx.write_run(tmp_path, "a100", fx.a100_sweep()[:2]) / "000000"  # 360 W ran faster than default
    (run / jube_run.RECORD).write_text("<jube/>\n")
    for work in sorted(run.glob("*_execute/work")):
        history.record(row_json.read(work / "row.json"), work)
    out = tmp_path / "out"
    assert fx.compare(["--history", str(db), "--out", str(out), "--no-references"]) == 0
    assert list(pd.read_csv(out / "history.csv")["per_s_per_device"]) == [19390.0]


@pytest.mark.parametrize("argv, message", [
    (["--history", "{tmp}/none.sqlite"], "none.sqlite: no such results history"),
    (["--history", "{tmp}/bad.sqlite"], "bad.sqlite: not a results history"),
    (["--history", "{tmp}/bad.sqlite", "{tmp}"], "give run directories or --history, not both"),
    ([], "no run directory given"),
])
def test_a_bad_history_argument_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    (tmp_path / "bad.sqlite").write_text("not sqlite")
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert fx.compare([*argv, "--out", str(tmp_path / "out")]) == comparison.BAD_INPUT
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_drop_against_the_series_own_earlier_runs_alone_exits_4(tmp_path, db, capsys):
    # 17,000 is within A100's published band (above 0.85 x 19 390) but 16 % below its own runs before
    for i, (value, day) in enumerate([(20000.0, 18), (20400.0, 20), (17000.0, 24)]):
        _record(tmp_path / f"a{i}", "a100", _dated(fx.a100, value, day, f"c{i}"))
    assert fx.compare(["--history", str(db), "--out", str(tmp_path / "out")]) == comparison.DROPPED
    printed = capsys.readouterr().out
    assert "DROP: A100 16 % below its 2 runs of 2026-11-18 to 2026-11-20" in printed
    assert "BELOW BAND" not in printed


@pytest.mark.parametrize("broken", ["a directory", "no database", "a damaged database"])
def test_a_history_that_cannot_be_written_is_said_once_in_each_rows_cause_and_in_the_exit_status(
        tmp_path, monkeypatch, capsys, broken):
    """The issue's cases: CARAML_HISTORY a directory, a file that is no
    SQLite database, a history whose pages are damaged. The main command
    (caraml/login/rows.py) says it once for the run, naming its rows, and
    exits 1; each row's `issues` cause names it; the rows stay in row.json."""
    from caraml.login import rows as main_rows
    from caraml.row import render
    from caraml.row.jube_lines import print_lines

    db = tmp_path / "history.sqlite"
    if broken == "a directory":
        db.mkdir()
    elif broken == "no database":
        db.write_bytes(b"\x00not sqlite\xff" * 512)
    else:
        history.write(row_json.from_dict(fx.a100()), tmp_path, db)
        data = bytearray(db.read_bytes())
        data[100:4096] = b"\xff" * (4096 - 100)  # the first page's b-tree after the header
        db.write_bytes(bytes(data))
    monkeypatch.setenv(history.ENV, str(db))
    outpath = fx.write_run(tmp_path, "a", [fx.a100(), fx.a100()])
    run = outpath / "000000"
    for work in sorted(run.glob("*_execute/work")):
        kept = history.keep(row_json.read(work / "row.json"), work)
        assert kept.history_error.startswith(f"{db}: not written (")
        # in row.json, so every reader of the run sees it; in the issues table's cause
        assert row_json.read(work / "row.json") == kept and render.notable(kept)
        assert render.cause(kept) == f"not in the results history: {kept.history_error}"
        print_lines(kept)
    assert capsys.readouterr().out.count("CARAML row reason: not in the results history:") == 2
    assert main_rows.main([str(run)]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"CARAML: the results history was not written, rows 1, 2 of {run} not in it: "
                           f"{db}: not written (")
    assert line.endswith(f"set {history.ENV} to a writable file; the rows are in their row.json")
