"""The Status column: platform.xml's status pattern, evaluated the way JUBE
evaluates a python-mode pattern (its ${...} references replaced by the
values the other patterns found)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from tests.jube_runs import ROOT


def _status_expression() -> str:
    patterns = ET.parse(ROOT / "platform.xml").getroot().find("patternset[@name='statusPatterns']")
    return next(p.text for p in patterns if p.get("name") == "status")


def status(**found) -> str:
    values = {"error_message_cnt": 0, "dry_run_written_cnt": 0, "job_started_cnt": 1,
              "job_ended_cnt": 1, "job_exit_status": 0, "stop_reason": "", **found}
    return eval(re.sub(r"\$\{(\w+)\}", lambda m: str(values[m.group(1)]), _status_expression()))


@pytest.mark.parametrize("found, expected", [
    ({"stop_reason": "iteration count 100 reached"}, "ok"),
    ({}, "ok"),  # vendor code prints no stop line
    ({"stop_reason": "signal SIGUSR1"}, "ok (stopped early: signal SIGUSR1)"),
    ({"stop_reason": "wall-clock budget 840 s reached"},
     "ok (stopped early: wall-clock budget 840 s reached)"),
    ({"job_exit_status": 143, "stop_reason": "signal SIGTERM"}, "FAILED"),
    ({"error_message_cnt": 1}, "FAILED"),
    ({"dry_run_written_cnt": 1, "job_started_cnt": 0, "job_ended_cnt": 0}, "dry run"),
    ({"job_started_cnt": 0, "job_ended_cnt": 0}, "queued"),
    ({"job_ended_cnt": 0}, "running"),
])
def test_the_status_of_a_row(found, expected):
    assert status(**found) == expected
