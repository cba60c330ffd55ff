"""Printing a decided row for JUBE: the `CARAML row:` line of its words
(caraml/row/render.py), which JUBE's patterns read (platform.xml's
rowPatterns), and the cause and flags lines. Standard library only (login
node)."""

from __future__ import annotations

import sys
import textwrap
from typing import TextIO

from caraml import report
from caraml.row import render
from caraml.row.record import Row


def print_lines(row: Row, file: TextIO | None = None) -> None:
    """The lines the JUBE tables read: single words in `CARAML row:` (an
    unknown value is left out: its cell stays empty), the free texts each
    on a line of its own (JUBE's patterns take the rest of the line; commas
    become semicolons): the Status cell, the cause (a measurement's is
    empty) and the flags."""
    _write(render.words(row), render.status(row), render.cause(row), list(row.flags), file)


def print_build(state: str, reason: str, file: TextIO | None = None) -> None:
    """A container build job's lines: its state and reason alone."""
    _write({"state": state, "notable": "no" if state == "built" else "yes"}, state, reason, [], file)


# JUBE's pretty tables show a cell of several lines one line under the
# other: a reason or list of flags wrapped at this width keeps the issues
# table within 160 characters (row.json and the full table keep them whole)
CELL_WIDTH = 36


def _cell(text: str) -> str:
    """Free text as lines of at most CELL_WIDTH characters (a longer word,
    a path, stays whole; a flag breaks at its hyphens), each after the
    first starting with two spaces (rowPatterns read them as one value)."""
    return "\n  ".join(textwrap.wrap(text, CELL_WIDTH, break_long_words=False))


def _write(fields: dict, status: str, reason: str, flags: list[str], file: TextIO | None) -> None:
    file = file or sys.stdout
    report.write_line(report.line("row", fields), file)
    report.write_line("CARAML row status: " + report.one_line(status), file)
    report.write_line("CARAML row reason: " + _cell(report.one_line(reason)), file)
    report.write_line("CARAML row flags: " + (_cell(" ".join(flags)) or "none"), file)
