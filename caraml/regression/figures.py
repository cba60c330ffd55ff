"""A decided row (caraml/row/record.py) as ReFrame reads it: the sanity
verdict, the performance variables with their units (caraml/row/render.py,
performance), the references from caraml-compare's reference file (the
same reader, the same matching, the same bands) and the provenance the
perflog carries.

Sanity: the row's job ran to its figures (caraml/row/status.py's
MEASURED). A row that ran and is no measurement (caraml/row/verdict.py:
too few timed iterations or seconds, energy that is not whole) passes
sanity and never passes its performance: every figure is NaN in the
perflog, an expected failure that names the verdict, as is a figure the
row lacks (an MFU refused on a busy host) with the row's own reason. The
other flags (cpu-contention, other-benchmarks-*, stopped-early) describe
the conditions of a figure that is still a measurement; they reach the
perflog in `flags`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from caraml.compare import reference
from caraml.compare.rows import RunDir, line
from caraml.row import render
from caraml.row.record import Row
from caraml.row.status import MEASURED
from caraml.row.verdict import shown

# the row's provenance as the perflog's fields (check variables of the same names)
PROVENANCE = ("commit", "suite_version", "torch", "energy_source", "energy_scope", "energy_kind",
              "energy_window", "system", "config", "flags", "status", "measurement")


def sanity(row: Row) -> tuple[bool, str]:
    """Whether the row passes, and why not."""
    if row.state not in MEASURED:
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
        name, unit = variables[reference.FIGURES[check["figure"]]]
        value = float(check["reference"])
        # the band's fractions back from its bounds, without the float noise of the division
        out[name] = (value, round(check["low"] / value - 1, 12), round(check["high"] / value - 1, 12), unit)
    return {key: out} if out else {}


def reframe_reference(row: Row, refs: pd.DataFrame, key: str, xfail) -> dict[str, dict]:
    """ReFrame's whole reference for this row: the bands of references(),
    and each figure the row lacks or that is no measurement (NaN in the
    perflog, whose columns never change) as an expected failure that says
    why, made by ReFrame's builtin xfail(message, reference), which the
    check passes in. ReFrame turns the dict into its scoped form when the
    check assigns it, so it is made whole here."""
    out = references(row, refs, key)
    units = {name: unit for name, (_, unit) in perf_values(row).items()}
    for name, why in render.missing(row).items():
        out.setdefault(key, {})[name] = xfail(why, (0, None, None, units[name]))
    return out


def provenance(row: Row) -> dict[str, str]:
    """What the perflog says of where the row came from, one text each."""
    labels = render.labels(row)
    fields = {
        "commit": row.commit, "suite_version": row.suite_version, "torch": row.torch,
        "energy_source": row.energy_methods, "energy_scope": row.energy_scope,
        "energy_kind": labels["energy_kind"], "energy_window": row.energy_window,
        "system": row.system_name, "config": row.label, "flags": " ".join(row.flags) or "none",
        "status": row.state,
        "measurement": "yes" if row.measurement else shown(row.not_a_measurement),
    }
    return {name: str(fields[name]) if fields[name] not in (None, "") else "n/a" for name in PROVENANCE}
