"""One name for each figure: a record with every field known, rendered
through every way the suite shows a row (caraml/row/render.py), holds each
field under the field's own name and as the same value: the JUBE row line,
the full table, the results history and caraml-compare's line."""

from __future__ import annotations

import dataclasses
import io
import math
import sqlite3

import pytest

from caraml import benchmarks
from caraml.compare import rows
from caraml.row import full_table, history, jube_lines, render, row_json, verdict
from caraml.row.record import FIELDS, KINDS, Row
from tests.caraml.recorded_rows import REPO as ROOT
from tests.caraml.recorded_rows import decide


def _known(name: str, kind: str, index: int) -> object:
    """A value for a field the decided row left unknown, distinct per field."""
    return {"number": 1.25 + index, "whole": 7 + index, "flag": True, "text": f"{name}-value",
            "words": (f"{name}-flag",), "pairs": {"a": 1.5 + index}}[kind]


@pytest.fixture
def row(tmp_path) -> Row:
    """A row the model decided, every field it left unknown given a value."""
    decided = row_json.from_dict(decide(tmp_path, "llm-ok")["row"])
    return dataclasses.replace(decided, **{name: _known(name, KINDS[name], index)
                                           for index, name in enumerate(FIELDS)
                                           if getattr(decided, name) in (None, "", (), {})})


def _same_word(value: object, word: str, name: str) -> bool:
    if isinstance(value, float):
        return float(word) == pytest.approx(value, rel=1e-3, abs=0.05 if name.startswith("power_w") else 0)
    return word == render._word(name, value)


def test_every_field_is_known_in_the_test_row(row):
    assert [name for name in FIELDS if getattr(row, name) in (None, "", (), {})] == []


def test_the_jube_row_line_holds_every_field_under_its_name(row):
    words = render.words(row)
    # the lines of their own: the cause (with why the row is not in the history) and the flags
    lines = {"reason": render.cause(row), "flags": " ".join(row.flags), "history_error": render.cause(row)}
    missing = [name for name in FIELDS if name not in words and name not in lines]
    assert missing == []
    assert row.history_error and row.history_error in render.cause(row)
    assert [name for name in words
            if name in FIELDS and not _same_word(getattr(row, name), words[name], name)] == []


def test_the_full_table_shows_each_field_under_its_name(row):
    cells = full_table.cells(row)
    columns = {column.field for entry in benchmarks.all_benchmarks()
               for column in full_table.columns(entry.name)}
    shown = [name for name in FIELDS if name in columns]
    assert {"per_s", "work_per_wh_timed", "wh_run", "timed_iterations", "global_batch"} <= set(shown)
    # the free texts stand whole in their cells, not as the row line's words
    assert [name for name in shown if name not in ("reason", "flags", "work_package", "node_energy_reason")
            and not _same_word(getattr(row, name), cells[name], name)] == []


def test_the_history_holds_every_field_in_a_typed_column_of_its_name(row, tmp_path):
    db = tmp_path / "history.sqlite"
    history.write(row, tmp_path, db)
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    [line] = [dict(r) for r in con.execute("select * from history")]
    con.close()
    values = render.history_values(row)
    assert [name for name in FIELDS if name not in line] == []
    assert [name for name in FIELDS if line[name] != values[name]] == []
    numbers = [name for name in FIELDS if KINDS[name] in ("number", "whole")]
    assert [name for name in numbers if line[name] != getattr(row, name)] == []


def test_caraml_compares_line_holds_every_field_under_its_name(row, tmp_path):
    line = rows.line(row, rows.RunDir(tmp_path, None), tmp_path / "row.json")
    assert [name for name in FIELDS if name not in line] == []
    numbers = [name for name in FIELDS if KINDS[name] in ("number", "whole")]
    assert [name for name in numbers if line[name] != getattr(row, name)] == []
    texts = [name for name in FIELDS if KINDS[name] in ("text", "flag")]
    assert [name for name in texts if line[name] != getattr(row, name)] == []


def test_an_unknown_figure_is_unknown_in_every_rendering(tmp_path):
    row = row_json.from_dict(decide(tmp_path, "operator-queued")["row"])
    assert row.per_s is None and "per_s" not in render.words(row)
    assert render.history_values(row)["per_s"] is None
    assert math.isnan(rows.line(row, rows.RunDir(tmp_path, None), tmp_path / "row.json")["per_s"])


MEASURED = Row(benchmark="image", state="ok", timed_iterations=90, time_per_iteration_s=1.0, timed_s=90.0)


@pytest.mark.parametrize("changes, status", [
    ({}, "ok"),
    ({"state": "ok-stopped-early"}, "ok-stopped-early"),
    ({"timed_iterations": 3, "timed_s": 2.6}, "ok (short)"),
    ({"state": "ok-stopped-early", "timed_s": None}, "ok-stopped-early (short)"),
    ({"loss_first": 9.0, "loss_nonfinite": "nan", "loss_nonfinite_at": 3}, "ok (numerics)"),
    ({"power_limit_not_default_at_start": ("180W-not-250W-on-ranks-0-1",)}, "ok (limit left)"),
    ({"loss_first": 9.0, "loss_last": 8.9, "loss_fall_needed": 0.05}, "ok (not learning)"),
    ({"energy_scope": "gpu+module", "energy_window": "timed", "energy_complete_timed": True},
     "ok (energy)"),
    # a row that did not run to its figures says so by its state
    ({"state": "failed", "reason": "out of memory"}, "failed"),
    ({"state": "queued"}, "queued"),
])
def test_the_status_cell_says_when_a_row_is_no_measurement(changes, status):
    """The result table's Status (the `CARAML row status:` line): the state,
    and the word of the verdict the row holds; the issues table's cause
    says the verdict whole."""
    row = verdict.judged(dataclasses.replace(MEASURED, **changes))
    assert render.status(row) == status
    assert (status == row.state) == (row.measurement or row.state not in ("ok", "ok-stopped-early"))
    out = io.StringIO()
    jube_lines.print_lines(row, out)
    assert out.getvalue().splitlines()[1] == f"CARAML row status: {status}"
    if not row.measurement and row.state == "ok":
        assert verdict.shown(row.not_a_measurement) in " ".join(render.cause(row).split())


def test_a_verdict_no_rule_of_today_words_is_named_as_no_measurement_not_judged_again():
    """The Status names the verdict the row holds (row.json keeps it as
    decided); a row decided by another version whose words no rule of today
    gives is shown as no measurement, never re-judged into a measurement."""
    row = dataclasses.replace(MEASURED, measurement=False, not_a_measurement="a rule of another version")
    assert render.status(row) == "ok (no measurement)"
    assert render.status(dataclasses.replace(MEASURED, measurement=True)) == "ok"


def test_a_benchmarks_own_columns_have_their_slots_in_the_row_line(monkeypatch):
    monkeypatch.setenv(benchmarks.REGISTRY_ENV, str(ROOT / "tests" / "tiny_benchmark" / "entry.py"))
    row = Row(benchmark="tiny", state="ok", details={"data": "random vectors", "features": "12"})
    words = render.words(row)
    # the entry's columns with a source, in its order: Data (own1), Features (own2)
    assert (words["own1"], words["own2"]) == ("random_vectors", "12")
    assert benchmarks.own_column_lines(benchmarks.get("tiny")) == [
        "row_own1\tData\tdata.name", "row_own2\tFeatures\tdata.features"]
    # the operator benchmark's seven fit the slots; a figure of the row needs none
    assert len(render.own_columns("operator")) == 7 <= benchmarks.OWN_SLOTS
    assert render.own_columns("no-such-benchmark") == {}


def test_a_figure_that_is_not_finite_is_left_out_of_the_row_line():
    """JUBE's typed patterns read every number of the line, and JUBE 2.5.1
    cannot read a nan or inf of its own record back (`jube result` fails)."""
    row = dataclasses.replace(MEASURED, per_s=math.inf, work_per_wh=math.nan, per_s_per_device=2.5)
    words = render.words(row)
    assert "per_s" not in words and "work_per_wh" not in words and words["per_s_per_device"] == "2.5"
    out = io.StringIO()
    jube_lines.print_lines(row, out)
    assert not any(word in out.getvalue().split("\n")[0].lower() for word in ("nan", "inf"))
