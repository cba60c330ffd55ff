"""The one verdict on a row: whether it is a measurement, and if not, why.
Every reader takes it from the record (caraml/row/record.py): the JUBE
`issues` table shows such a row as `not a measurement (why)`, ReFrame
makes its figures an expected failure naming why, caraml-compare never
ranks, divides or extrapolates it, and the history draws it apart.

A row is a measurement when, in this order (the first rule that fails
names the row's why):

- its job ran to its figures (status ok or ok-stopped-early);
- its numerics hold (caraml/node/numerics.py): every loss finite, at most
  MAX_SKIPPED_SHARE of its timed iterations with their update skipped by
  a gradient scaler, and its loss within the band its benchmark declares
  (caraml/benchmark_entry.py LossBand): the first loss near that of a
  model that has learnt nothing. A device or precision that computes
  garbage fast, or a run that diverged, would otherwise rank first;
- it ran at the power limit it names: a run whose devices began away from
  their default limit ran at a limit an earlier point or job left behind
  (caraml/row/power_limit.py), which neither a plain run nor a `default`
  point nor a point the suite sets on top of it may compare; only a point
  the centre set before the job (mode external) begins at its own limit;
- it timed at least MIN_TIMED_ITERATIONS iterations lasting at least
  MIN_TIMED_SECONDS together: a shorter run reports clock boosts before
  the device is warm, data-loader start-up and single slow steps rather
  than a steady rate, and gives a 1 Hz power sensor too few samples
  (docs/compare.md says why these two);
- on a real corpus its loss fell by the share its benchmark declares
  (after the length rule: a run too short to learn is named too short);
- where it measured energy, its headline window is whole and counts one
  scope on every host: a figure with lost samples or added scopes is not
  what it claims.

    python -m caraml.row.verdict window

prints the driver options of a row that is planned as a measurement
(caraml/node/options.py: --min-timed-iterations, --min-timed-seconds):
the rule's iterations and PLANNED_WINDOW_S seconds, or CARAML_MEASURE_S
seconds where that is set (the test suite shortens the README's main
command with it: its rows are then not measurements). Standard library
only (login node)."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping

from caraml import report
from caraml.power_limit import DEFAULT, EXTERNAL
from caraml.row.record import Row
from caraml.row.status import RAN

MIN_TIMED_ITERATIONS = 20
MIN_TIMED_SECONDS = 60.0
# the window a row planned as a measurement times: a second more than the
# rule, as the summary line rounds its time per iteration to six digits
PLANNED_WINDOW_S = MIN_TIMED_SECONDS + 1
WINDOW_ENV = "CARAML_MEASURE_S"
NOT_A_MEASUREMENT = "not a measurement"
# why a row of a run still going is no measurement yet, where its status
# gives no reason (a job that has not ended has none)
UNFINISHED = {
    "running": "the job has not ended yet: its row is decided once `jube continue` has seen it end",
    "queued": "the job has not started yet: its row is decided once it has run (`jube continue`)",
    "pending": "Slurm has not started the job yet: its row is decided once it has run (`jube continue`)",
}
# A gradient scaler that has found its scale skips an update only where it
# tries a larger one (once in its growth interval, 2000 steps by default)
# or the gradients overflow; a run that skips more than this share of its
# timed updates timed work that trained nothing.
MAX_SKIPPED_SHARE = 0.05


def _ran(row: Row) -> str:
    if row.state in RAN:
        return ""
    reason = row.reason or UNFINISHED.get(row.state, "")
    return f"{row.state}: {reason}" if reason else row.state


def _numerics(row: Row) -> str:
    if row.loss_nonfinite_at is not None:
        return f"loss {row.loss_nonfinite} at iteration {row.loss_nonfinite_at}"
    skipped, timed = row.skipped_iterations, row.timed_iterations
    if skipped and timed and skipped > MAX_SKIPPED_SHARE * timed:
        return (f"{skipped} of {timed} timed iterations skipped their update; a measurement "
                f"allows {MAX_SKIPPED_SHARE * 100:g} %")
    first, untrained, tolerance = row.loss_first, row.loss_untrained, row.loss_tolerance
    if first is not None and untrained is not None and tolerance is not None \
            and abs(first - untrained) > tolerance * untrained:
        return (f"first loss {first:.4g}, outside {untrained:.4g} ± {tolerance * 100:g} % (the loss "
                f"of a model that has learnt nothing)")
    return ""


def _learns(row: Row) -> str:
    # after the length rule: a run too short to learn is named too short, not a loss that did not fall
    fall, first, last = row.loss_fall_needed, row.loss_first, row.loss_last
    if fall is not None and first is not None and last is not None and last > first * (1 - fall):
        return (f"loss {first:.4g} to {last:.4g} over the run: a run on a real corpus falls by at "
                f"least {fall * 100:g} %")
    return ""


def _at_its_limit(row: Row) -> str:
    off = row.power_limit_not_default_at_start
    if not off or (row.power_limit_mode == EXTERNAL and row.power_limit != DEFAULT):
        return ""
    return (f"its devices' power limit was not their default at the job's start ({', '.join(off)}): a "
            "limit left by an earlier point or job that was not put back; reset the node's limits "
            "(the epilog site/slurm-epilog-power-limits.sh, or nvidia-smi -i N -pl W as root) and run "
            "it again")


def _long_enough(row: Row) -> str:
    if row.timed_iterations is None or row.timed_s is None:
        return "its timed iterations or their time are not recorded"
    if row.timed_iterations < MIN_TIMED_ITERATIONS or row.timed_s < MIN_TIMED_SECONDS:
        plural = "" if row.timed_iterations == 1 else "s"
        return (f"{row.timed_iterations:g} timed iteration{plural} in {row.timed_s:.3g} s; a measurement "
                f"needs {MIN_TIMED_ITERATIONS} and {MIN_TIMED_SECONDS:g} s")
    return ""


def energy_whole(row: Row) -> bool:
    """Whether the headline energy (its window's: caraml/row/facts.py) covers all of its window."""
    return bool(row.energy_complete_timed if row.energy_window == "timed" else row.energy_complete_run)


def _energy_whole(row: Row) -> str:
    if row.energy_scope is None:
        return ""  # no energy measured: nothing to be whole
    if not energy_whole(row):
        covered = row.energy_covered_pct
        share = "an unknown share" if covered is None else f"{covered:.0f} %"
        return f"its energy is not whole (its samples cover {share} of the run)"
    if "+" in row.energy_scope:
        return f"its energy adds the different scopes of its hosts ({row.energy_scope})"
    return ""


# each rule gives why a row is not a measurement, or "" where it passes;
# its word names that kind of verdict where a table has room for one word
RULES = (("not run", _ran), ("numerics", _numerics), ("limit left", _at_its_limit),
         ("short", _long_enough), ("not learning", _learns), ("energy", _energy_whole))
# the word of a verdict that no rule of this version words so (a row decided by another)
OTHER = "no measurement"


def judge(row: Row) -> str:
    """Why the row is not a measurement: the first rule it fails; "" for a measurement."""
    return next((why for _, rule in RULES if (why := rule(row))), "")


def judged(row: Row) -> Row:
    """The row with the one verdict on it."""
    why = judge(row)
    return dataclasses.replace(row, measurement=not why, not_a_measurement=why)


def shown(why: str) -> str:
    """The verdict as every table words it."""
    return f"{NOT_A_MEASUREMENT} ({why})"


def window_s(environ: Mapping[str, str] = os.environ) -> float:
    """The timed seconds a row planned as a measurement runs for."""
    given = environ.get(WINDOW_ENV)
    if given is None:
        return PLANNED_WINDOW_S
    try:
        seconds = float(given)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise ValueError(f"{WINDOW_ENV}={given!r} is no positive number of seconds; unset it for "
                         f"a measurement ({PLANNED_WINDOW_S:g} s)")
    return seconds


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["window"]:
        report.error("usage: python -m caraml.row.verdict window")
        return 2
    try:
        seconds = window_s()
    except ValueError as err:
        report.error(str(err))
        return 2
    report.parameter(f"--min-timed-iterations {MIN_TIMED_ITERATIONS} --min-timed-seconds {seconds:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
