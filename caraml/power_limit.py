"""One point of a power-limit sweep (the `powercap` tag): the limit per
device a job asks for, who sets it, and what stops a sweep that may not.

A point is `default` (the limit the devices have: nothing is set, the limit
is reported), watts (`300`), or a fraction of the system's TDP per device
(`0.75`: any number up to 1). platform.xml declares each system's TDP and
the range of limits it allows beside it (power_limit_range_w, LOW:HIGH in
W, either end may be left open), the scope its limits are set at
(power_limit_scope: `gpu`, the GPU's own limit, or `module`, a GH200
superchip's limit for the whole of it, the unit its TDP counts, or
`package`, an MI250 card's for its two GCDs, whose TDP is the devices'
together), the points it sweeps and who sets the limit (power_limit_mode:
`suite`, the job's ranks, which needs the privilege to; `external`, the
centre, before the job: a Slurm prolog or SPANK option, an administrator,
and the job checks and records it). CARAML_POWER_LIMITS (`default;250;300`)
replaces the points for one run, CARAML_POWER_LIMIT_SCOPE (`gpu`) the
scope, CARAML_POWER_LIMIT_MODE the mode.

The node side is caraml/node/power_limit_run.py (the driver core's) and
caraml/job/power_guard.py (the job's guard); the row's record of what
their lines say is the row model's (caraml/row/power_limit.py).

    python -m caraml.power_limit sweep POINTS
    python -m caraml.power_limit scope SCOPE
    python -m caraml.power_limit mode MODE

print the points of a sweep for JUBE (CARAML_POWER_LIMITS where it is set,
else POINTS), each checked, the scope (CARAML_POWER_LIMIT_SCOPE where it is
set, else SCOPE) and the mode (likewise), checked. Standard library only
(and jpwr's scope names, which are): the login node's python3 runs this."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from caraml import report
from caraml.report import BenchmarkInputError
from jpwr.gpu.power_limit import PACKAGE, SCOPES

DEFAULT = "default"
POINTS_ENV = "CARAML_POWER_LIMITS"
SCOPE_ENV = "CARAML_POWER_LIMIT_SCOPE"
MODE_ENV = "CARAML_POWER_LIMIT_MODE"
# who sets a point's limit: the job's ranks, or the centre before the job
SUITE, EXTERNAL = "suite", "external"
MODES = (SUITE, EXTERNAL)
# the scopes of the lines each rank prints (caraml/node/power_limit_run.py)
SET_SCOPE = "power limit"
RESTORED_SCOPE = "power limit restored"
START_SCOPE = "power limit at start"
# the power guard's (caraml/job/power_guard.py): a limit found, all found, one put back, the end
GUARD_FOUND, GUARD_READY, GUARD_RESTORED, GUARD_END = ("power guard", "power guard ready",
                                                       "power guard restored", "power guard end")
# the guard's record of each node in the job's folder: this, then the host's name
GUARD_FILES = "power_guard."
# In the run's folder: the line of the first point that found no privilege
# to set a limit, which every later point of the sweep ends with at once
REFUSED_FILE = "power_limit_refused"
_NUMBER = re.compile(r"\d+(\.\d*)?|\.\d+")


def line_watts(value: float | None) -> object:
    """A limit in watts as the power-limit and guard lines write it: "-" where not known."""
    return "-" if value is None else round(value, 3)


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


def check_mode(text: str) -> str:
    """Who sets the limit, as given, or BenchmarkInputError naming the modes."""
    if text in MODES:
        return text
    raise BenchmarkInputError(f"power limit mode {text!r} is none of {' or '.join(MODES)}")


def point_tdp_w(tdp_w: float | None, scope: str | None, devices_per_package: int | None) -> float | None:
    """The TDP a fractional point is a fraction of: the device's, or at
    package scope the package's (its devices' together)."""
    if tdp_w and scope == PACKAGE:
        return tdp_w * (devices_per_package or 1)
    return tdp_w


def parse_range(text: str | None) -> tuple[float | None, float | None] | None:
    """LOW:HIGH in watts, either end empty for open; None where not given."""
    if not text:
        return None
    low, sep, high = text.partition(":")
    try:
        if not sep:
            raise ValueError
        low_w, high_w = (float(end) if end else None for end in (low, high))
    except ValueError:
        raise BenchmarkInputError(f"power limit range {text!r} is not LOW:HIGH in watts "
                                  "(e.g. 100:400; either end may be left empty)") from None
    return low_w, high_w


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


def refusal_marker(rundir: str | Path) -> Path:
    return Path(rundir) / REFUSED_FILE


def refused_before(rundir: str | Path) -> str | None:
    """The line of an earlier point of this run that found no privilege to
    set a limit; None where none did."""
    try:
        return refusal_marker(rundir).read_text().strip() or None
    except OSError:
        return None


# what each subcommand reads: its variable, platform.xml's parameter, its check
_GIVEN: dict[str, tuple[str, str, Callable[[str], str]]] = {
    "sweep": (POINTS_ENV, "power_limit_sweep",
              lambda given: ";".join(check_point(p.strip()) for p in given.split(";") if p.strip())),
    "scope": (SCOPE_ENV, "power_limit_scope", lambda given: check_scope(given.strip())),
    "mode": (MODE_ENV, "power_limit_mode", lambda given: check_mode(given.strip()))}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in _GIVEN:
        report.error("usage: python -m caraml.power_limit sweep POINTS | scope SCOPE | mode MODE")
        return 2
    env, declared, check = _GIVEN[argv[0]]
    given = os.environ.get(env) or argv[1]
    try:
        checked = check(given)
    except BenchmarkInputError as err:
        report.error(f"{env if os.environ.get(env) else declared}: {err}")
        return 2
    report.parameter(checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
