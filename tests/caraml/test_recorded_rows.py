"""The row model gives the figures it gave before for the same run: each
work package of tests/caraml/recorded_rows.py, decided now, has every value
of its recorded row.json (schema caraml-row/1, read into today's record)
and of its recorded `CARAML row` lines (a field added since may join, and a
value the row did not know may be known now; no known value may change or
go). Two kinds of change are named here, each checked: the labels of the
row line whose names are the record's fields now, and the rows the one
verdict finds no measurement (the tables say so; every figure stays)."""

from __future__ import annotations

import json

import pytest

from caraml.row import row_json
from caraml.row.verdict import shown
from tests.caraml.recorded_rows import CASES, RECORD, decide

# a label of the row line -> its name now: the record's field of that name holds the figure itself
# (the scope without its window, the count of energy devices)
MOVED = {"energy_scope": "energy_scope_shown", "energy_devices": "energy_devices_shown"}
# the rows the one verdict finds no measurement, and why
NOT_MEASUREMENTS = {
    "image-ok": "90 timed iterations in 18 s; a measurement needs 20 and 60 s",
    "operator-ok": "90 timed iterations in 4.5 s; a measurement needs 20 and 60 s",
    # Graphcore's GPT-2 logged three steps
    "llm-graphcore": "3 timed iterations in 100 s; a measurement needs 20 and 60 s",
}


def _recorded(name: str) -> dict:
    return json.loads(RECORD.read_text())[name]


def _missing_or_changed(recorded, now, where="row") -> list[str]:
    """Every value of the recorded structure that the present one lacks or changed."""
    if isinstance(recorded, dict) and isinstance(now, dict):
        return [found for key, value in recorded.items()
                for found in (_missing_or_changed(value, now[key], f"{where}.{key}") if key in now
                              else [f"{where}.{key} is gone"])]
    if recorded is None or recorded == now:
        return []
    return [f"{where}: recorded {recorded!r}, now {now!r}"]


def _fields(line: str) -> dict[str, str]:
    return dict(word.split("=", 1) for word in line.removeprefix("CARAML row: ").split())


def test_every_state_and_benchmark_is_recorded():
    record = json.loads(RECORD.read_text())
    assert set(record) == set(CASES)
    assert {r["row"]["benchmark"] for r in record.values()} == {"llm", "image", "operator"}
    assert {r["row"]["status"]["state"] for r in record.values()} >= {
        "ok", "ok-stopped-early", "failed", "queued"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_row_is_decided_as_recorded(tmp_path, name):
    recorded, now = _recorded(name), decide(tmp_path, name)
    row = row_json.from_dict(now["row"])
    # the recorded row as today's record; its verdict was not recorded (it is judged when read): below
    was_row = {key: value for key, value in row_json.to_dict(row_json.from_dict(recorded["row"])).items()
               if key not in ("measurement", "not_a_measurement")}
    assert _missing_or_changed(was_row, row_json.to_dict(row)) == []
    was, line = _fields(recorded["lines"][0]), _fields(now["lines"][0])
    expected = {MOVED.get(key, key): value for key, value in was.items()}
    # the Status line joined since: the state, and the verdict's word on a row that is no measurement
    status, lines = now["lines"][1], [now["lines"][0], *now["lines"][2:]]
    if name in NOT_MEASUREMENTS:
        assert (row.measurement, row.not_a_measurement) == (False, NOT_MEASUREMENTS[name])
        assert status == f"CARAML row status: {row.state} (short)"
        expected["notable"] = "yes"
        assert " ".join(part.strip() for part in lines[1:-1]) == \
            f"CARAML row reason: {shown(NOT_MEASUREMENTS[name])}"
        assert lines[-1] == recorded["lines"][-1]  # the flags
    else:
        assert status == f"CARAML row status: {row.state}"
        assert lines[1:] == recorded["lines"][1:]  # the reason and the flags
    assert _missing_or_changed(expected, line, "CARAML row") == []
