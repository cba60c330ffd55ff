"""The lines a driver prints for JUBE's patterns (see platform.xml) and for a
person reading job.out. One format for both benchmarks:

    CARAML global: images_per_s_mean=812.3 images_per_s_median=815.0
    CARAML rank 0: images_per_s_mean=203.1
    CARAML stop: iteration count 100 reached
    CARAML ERROR: global batch size 100 does not divide by 3 devices
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TextIO


class BenchmarkInputError(ValueError):
    """Bad input that must stop a run before training starts, with one line
    that names the problem."""


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    text = str(value)
    if any(c.isspace() for c in text):
        raise ValueError(f"report values must not contain spaces: {text!r}")
    return text


def line(scope: str, metrics: Mapping[str, object]) -> str:
    body = " ".join(f"{k}={_fmt(v)}" for k, v in metrics.items())
    return f"CARAML {scope}: {body}"


def write_line(text: str, file: TextIO | None = None) -> None:
    """Writes `text` and its newline in one write. The ranks of a node share
    the job's output file; under PYTHONUNBUFFERED print() writes the text and
    the newline separately, and another rank's line can land in between,
    where JUBE's patterns no longer find it."""
    file = file or sys.stdout
    file.write(text + "\n")
    file.flush()


def emit(scope: str, **metrics: object) -> None:
    write_line(line(scope, metrics))


def stop(reason: str) -> None:
    """Why the run ended (iteration count, wall-clock budget, a signal), for
    the person reading job.out."""
    write_line(f"CARAML stop: {reason}")


def error(message: str) -> None:
    """One line on stderr; the job's error file and the result table show it.
    Commas become semicolons: JUBE splits a value at commas, and its csv
    tables do not quote."""
    text = " ".join(message.split()).replace(",", ";")
    write_line(f"CARAML ERROR: {text}", sys.stderr)
