"""A decided row (caraml/row/record.py) as ReFrame reads it: the sanity
verdict, the performance variables with their units (caraml/row/render.py,
performance), the references from caraml-compare's reference file (the
same reader, the same matching, the same bands) and the provenance the
perflog carries.

Sanity: the row's job ran to its figures (caraml/row/status.py's
RAN). A row that ran and is no measurement (caraml/row/verdict.py:
too few timed iterations or seconds, energy that is not whole) passes
sanity and never passes its performance: every figure is NaN in the
perflog, an expected failure that names the verdict (once, after the
variables it holds for), as is a figure the row lacks (an MFU refused on a
busy host, a node meter that gave no figure) with the row's own reason. The
other flags (cpu-contention, other-benchmarks-*, stopped-early) describe
the conditions of a figure that is still a measurement; they reach the
perflog in `flags`."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from caraml.compare import reference
from caraml.compare.rows import RunDir, line
from caraml.row import render
from caraml.row.record import Row
from caraml.row.status import RAN
from caraml.row.verdict import shown

# the row's provenance as the perflog's fields (check variables of the same names)
PROVENANCE = ("commit", "suite_version", "torch", "energy_methods", "energy_scope", "energy_kind",
              "energy_window", "system", "config", "flags", "status", "measurement")


def sanity(row: Row) -> tuple[bool, str]:
    """Whether the row passes, and why not."""
    if row.state not in RAN:
        return False, f"row {row.state}: {row.reason or 'no reason given'}"
    return True, ""


def perf_values(row: Row) -> dict[str, tuple[float, str]]:
    """The row's figures as performance variables: name -> (value, unit)."""
    return {name: (value, unit) for name, (value, unit, _) in render.performance(row).items()}


def load_references(extra: list[Path] | None = None, suite: bool = True) -> pd.DataFrame:
    """caraml-compare's reference file (unless suite is false) and any extra
    ones (a centre's own measurements), read and checked by caraml-compare's
    reader."""
    frames = ([reference.load()] if suite else []) + [reference.load(Path(path)) for path in extra or []]
    return pd.concat([f for f in frames if not f.empty] or [reference.load_empty()], ignore_index=True)


def references(row: Row, refs: pd.DataFrame, key: str) -> dict[str, dict[str, tuple]]:
    """ReFrame's reference for this row, {key: {variable: (value, -lower,
    upper, unit)}}: each reference that caraml-compare would check this row
    against, with its band as fractions of the value (ReFrame's lower
    threshold is negative). Where two references give one figure, the later
    (an extra file's) wins."""
    checks = reference.verdicts(pd.DataFrame([line(row, RunDir(Path(row.work_package or "."), None),
                                                   Path("row.json"))]), refs)
    variables = {field: (name, unit) for name, (_, unit, field) in render.performance(row).items()}
    out = {}
    for _, check in checks.iterrows():
        field = reference.FIGURES[check["figure"]]
        if field not in variables:  # a node figure's, on a partition whose cluster meters no node
            continue
        name, unit = variables[field]
        value = float(check["reference"])
        # the band's fractions back from its bounds, without the float noise of the division
        out[name] = (value, round(check["low"] / value - 1, 12), round(check["high"] / value - 1, 12), unit)
    return {key: out} if out else {}


def _bounds(ref: tuple) -> tuple[float, float]:
    """A ReFrame reference's band as figures: (value, lower, upper[, unit]),
    the thresholds fractions of the value, None unbounded."""
    value, lower, upper = ref[:3]
    return (value * (1 + lower) if lower is not None else -math.inf,
            value * (1 + upper) if upper is not None else math.inf)


def stricter(a: tuple | None, b: tuple | None, unit: str) -> tuple | None:
    """Two references of one figure as one: a figure must meet both, so
    the higher lower bound and the lower upper bound apply, around the
    value of the reference that sets the lower bound (ReFrame's form:
    value, thresholds as fractions of it, unit)."""
    if a is None or b is None:
        return a if b is None else b
    (a_low, a_high), (b_low, b_high) = _bounds(a), _bounds(b)
    low, high = max(a_low, b_low), min(a_high, b_high)
    value = a[0] if a_low >= b_low else b[0]
    return (value, None if math.isinf(low) else round(low / value - 1, 12),
            None if math.isinf(high) else round(high / value - 1, 12), unit)


def reframe_reference(row: Row, refs: pd.DataFrame, key: str, xfail: Callable[[str, tuple], object],
                      centre: dict[str, object] | None = None) -> dict[str, dict[str, object]]:
    """ReFrame's whole reference for this row: the bands of references(),
    merged with the reference a centre's subclass gives the ReFrame way
    (`centre`: variable -> tuple, as resolved for this partition), the
    stricter bound of each side applying; and each figure the row lacks or
    that is no measurement (NaN in the perflog, whose columns never change)
    as an expected failure that says why, made by ReFrame's builtin xfail(message,
    reference), which the check passes in. ReFrame turns the dict into its
    scoped form when the check assigns it, so it is made whole here."""
    out: dict[str, dict[str, object]] = {k: dict(v) for k, v in references(row, refs, key).items()}
    units = {name: unit for name, (_, unit) in perf_values(row).items()}
    for name, theirs in (centre or {}).items():
        if name in units:
            ours = out.get(key, {}).get(name)
            merged = stricter(ours if isinstance(ours, tuple) else None, tuple(theirs), units[name]) \
                if isinstance(theirs, (tuple, list)) else theirs  # a centre's own xfail stays
            out.setdefault(key, {})[name] = merged
    for name, message in xfail_messages(render.missing(row)).items():
        out.setdefault(key, {})[name] = xfail(message, (0, None, None, units[name]))
    return out


def xfail_messages(missing: dict[str, str]) -> dict[str, str]:
    """Each expected failure's message, so that the line ReFrame makes of
    them (the messages of the variables in order, joined by ', ') says
    each reason once, after the variables it holds for: `tokens_per_s,
    tokens_per_s_per_device, ..., power_w_per_device: not a measurement
    (...)`. A variable whose reason the next one shares gives its name alone."""
    names = list(missing)
    return {name: name if i + 1 < len(names) and missing[names[i + 1]] == missing[name]
            else f"{name}: {missing[name]}" for i, name in enumerate(names)}


def provenance(row: Row) -> dict[str, str]:
    """What the perflog says of where the row came from, one text each."""
    labels = render.labels(row)
    fields = {
        "commit": row.commit, "suite_version": row.suite_version, "torch": row.torch,
        "energy_methods": row.energy_methods, "energy_scope": row.energy_scope,
        "energy_kind": labels["energy_kind"], "energy_window": row.energy_window,
        "system": row.system_name, "config": row.label, "flags": " ".join(row.flags) or "none",
        "status": row.state,
        "measurement": "yes" if row.measurement else shown(row.not_a_measurement),
    }
    return {name: str(fields[name]) if fields[name] not in (None, "") else "n/a" for name in PROVENANCE}
