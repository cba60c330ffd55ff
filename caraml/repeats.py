"""Repeats of each configuration in one JUBE run (the `repeat` tag): a
figure from one run cannot tell a 5 % lead from noise, so the tag runs
every configuration CARAML_REPEATS times (default 3). Each work package's
`repeat` parameter (1, 2, ...) reaches its row (the record's `repeat`);
caraml-compare groups the repeats of one configuration.

The runs are interleaved: JUBE varies the parameters of a parameterset in
the order they are declared, the first slowest, so a script declares
`repeat` first in its benchmark's own parameterset, and every
configuration runs once before any runs twice; drift over the hours of a
JUBE run (a warming room, a neighbour's job, a throttling device) then
touches every configuration alike instead of the last ones only.

    python -m caraml.repeats

prints the repeat indices for JUBE (1;2;3), checked. Standard library only:
the login node's python3 runs it."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from caraml import report

DEFAULT = 3
ENV = "CARAML_REPEATS"


def indices(environ: Mapping[str, str] = os.environ) -> list[int]:
    """1..N, N from CARAML_REPEATS, else DEFAULT; ValueError names a bad value."""
    given = environ.get(ENV, "").strip()
    if not given:
        return list(range(1, DEFAULT + 1))
    if not given.isdigit() or int(given) < 1:
        raise ValueError(f"{ENV}={given!r} is no positive whole number of runs of each "
                         f"configuration; unset it for {DEFAULT}")
    return list(range(1, int(given) + 1))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        report.error("usage: python -m caraml.repeats")
        return 2
    try:
        report.parameter(";".join(map(str, indices())))
    except ValueError as err:
        report.error(str(err))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
