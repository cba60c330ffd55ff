"""One name for each figure: a record with every field known, rendered
through every way the suite shows a row (caraml/row/render.py), holds each
field under the field's own name and as the same value: the JUBE row line,
the full table, the results history and caraml-compare's line."""

from __future__ import annotations

import dataclasses
import math
import sqlite3

import pytest

from caraml import benchmarks
from caraml.compare import rows
from caraml.row import full_table, history, render, row_json
from caraml.row.record import FIELDS, KINDS, Row
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
