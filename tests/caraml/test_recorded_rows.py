"""The row model gives the figures it gave before for the same run: each
work package of tests/caraml/recorded_rows.py, decided now, has every value
of its recorded row.json and of its recorded `CARAML row` lines (a field
added since may join, and a value the row did not know may be known now;
no known value may change or go)."""

from __future__ import annotations

import json

import pytest

from tests.caraml.recorded_rows import CASES, RECORD, decide


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
    assert _missing_or_changed(recorded["row"], now["row"]) == []
    assert _missing_or_changed(_fields(recorded["lines"][0]), _fields(now["lines"][0]),
                               "CARAML row") == []
    assert now["lines"][1:] == recorded["lines"][1:]  # the reason and the flags
