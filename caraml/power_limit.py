"""One point of a power-limit sweep (the `powercap` tag): the limit per
device a job asks for, and its record in the job's output and in the row.

A point is `default` (the limit the devices have: nothing is set, the limit
is reported), watts (`300`), or a fraction of the system's TDP per device
(`0.75`: any number up to 1). platform.xml declares each system's TDP and
the range of limits it allows beside it (power_limit_range_w, LOW:HIGH in
W, either end may be left open), the scope its limits are set at
(power_limit_scope: `gpu`, the GPU's own limit, or `module`, a GH200
superchip's limit for the whole of it, the unit its TDP counts) and the
points it sweeps; CARAML_POWER_LIMITS (`default;250;300`) replaces the
points for one run, CARAML_POWER_LIMIT_SCOPE (`gpu`) the scope.

Every rank sets its own device's limit before the model is built and puts
the previous one back at the end, whatever ends the run (the driver core,
caraml/node/driver.py, through jpwr/gpu/power_limit.py); each rank prints what
it did:

    CARAML power limit: rank=0 device=gpu0 scope=gpu asked=0.75 asked_w=300 before_w=400 reported_w=300
    CARAML power limit restored: rank=0 device=gpu0 restored=yes limit_w=400

    python -m caraml.power_limit sweep POINTS
    python -m caraml.power_limit scope SCOPE

print the points of a sweep for JUBE (CARAML_POWER_LIMITS where it is set,
else POINTS), each checked, and the scope (CARAML_POWER_LIMIT_SCOPE where
it is set, else SCOPE), checked. The row's record of the point is the row
model's (caraml/row/power_limit.py). Standard library only (and jpwr's
scope names, which are): the login node's python3 runs this."""

from __future__ import annotations

import os
import re
import sys

from caraml import report
from caraml.report import BenchmarkInputError
from jpwr.gpu.power_limit import SCOPES

DEFAULT = "default"
POINTS_ENV = "CARAML_POWER_LIMITS"
SCOPE_ENV = "CARAML_POWER_LIMIT_SCOPE"
# the scopes of the lines each rank prints (caraml/node/driver.py)
SET_SCOPE = "power limit"
RESTORED_SCOPE = "power limit restored"
_NUMBER = re.compile(r"\d+(\.\d*)?|\.\d+")


def check_point(text: str) -> str:
    """A sweep point as given, or BenchmarkInputError saying what one is."""
    if text == DEFAULT or (_NUMBER.fullmatch(text) and float(text) > 0):
        return text
    raise BenchmarkInputError(f"power limit {text!r} is none of '{DEFAULT}', watts (e.g. 300) or a "
                              "fraction of the TDP (e.g. 0.75)")


def check_scope(text: str) -> str:
    """A limit's scope as given, or BenchmarkInputError naming the scopes."""
    if text in SCOPES:
        return text
    raise BenchmarkInputError(f"power limit scope {text!r} is none of {' or '.join(SCOPES)}")


def parse_range(text: str | None) -> tuple[float | None, float | None] | None:
    """LOW:HIGH in watts, either end empty for open; None where not given."""
    if not text:
        return None
    low, sep, high = text.partition(":")
    try:
        if not sep:
            raise ValueError
        ends = tuple(float(end) if end else None for end in (low, high))
    except ValueError:
        raise BenchmarkInputError(f"power limit range {text!r} is not LOW:HIGH in watts "
                                  "(e.g. 100:400; either end may be left empty)") from None
    return ends


def asked_w(point: str, tdp_w: float | None) -> float | None:
    """The watts per device a point asks for; None for the default point."""
    check_point(point)
    if point == DEFAULT:
        return None
    value = float(point)
    if value > 1:
        return value
    if not tdp_w:
        raise BenchmarkInputError(f"power limit {point} is a fraction of the TDP, and this system "
                                  "declares no TDP (tdp_w in platform.xml); ask for watts instead")
    return value * tdp_w


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in ("sweep", "scope"):
        report.error("usage: python -m caraml.power_limit sweep POINTS | scope SCOPE")
        return 2
    env, declared = (POINTS_ENV, "power_limit_sweep") if argv[0] == "sweep" \
        else (SCOPE_ENV, "power_limit_scope")
    given = os.environ.get(env) or argv[1]
    try:
        if argv[0] == "scope":
            checked = check_scope(given.strip())
        else:
            checked = ";".join(check_point(p.strip()) for p in given.split(";") if p.strip())
    except BenchmarkInputError as err:
        report.error(f"{env if os.environ.get(env) else declared}: {err}")
        return 2
    report.parameter(checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
