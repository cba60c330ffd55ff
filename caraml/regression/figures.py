"""A decided row (row.json, caraml/row.py) as ReFrame reads it: the sanity
verdict, the performance variables with their units, the references from
caraml-compare's reference file (the same reader, the same matching, the same
bands) and the provenance the perflog carries.

Sanity: the row is a measurement (caraml/row/status.py's MEASURED) and no
flag makes its figures something other than what they claim:

    energy-incomplete                    samples or files of the energy were lost
    energy-scopes-differ-between-hosts   the energy adds different scopes together

The other flags (cpu-contention, other-benchmarks-*, stopped-early) describe
the conditions of a figure that is still a measurement; they pass sanity
and reach the perflog in `flags`."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from caraml import benchmarks
from caraml.compare import reference
from caraml.compare.rows import RunDir, flatten
from caraml.row.status import MEASURED

INVALIDATING = ("energy-incomplete", "energy-scopes-differ-between-hosts")
# caraml-compare's figures by the performance variable that carries them
# ({work}: the row's unit of work). A benchmark's variables are the same in
# every run, so its perflog's columns never change: the energy's scope,
# window and kind are in the unit and the perflog's provenance fields.
FIGURE_VARIABLES = {"throughput": "{work}_per_s", "throughput_per_device": "{work}_per_s_per_device",
                    "throughput_per_node": "{work}_per_s_per_node", "mfu": "mfu",
                    "work_per_wh": "{work}_per_wh"}
# the row's provenance as the perflog's fields (check variables of the same names)
PROVENANCE = ("commit", "suite_version", "torch", "energy_source", "energy_scope", "energy_kind",
              "energy_window", "system", "config", "flags", "status")


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def sanity(row: dict) -> tuple[bool, str]:
    """Whether the row passes, and why not."""
    status = row.get("status") or {}
    if status.get("state") not in MEASURED:
        return False, (f"row {status.get('state')}: {status.get('reason') or 'no reason given'}")
    bad = [flag for flag in row.get("flags") or [] if flag.startswith(INVALIDATING)]
    if bad:
        return False, f"row flagged {' '.join(bad)}: its figures are not what they claim"
    return True, ""


def _energy(row: dict) -> tuple[dict, str, str]:
    """The headline energy window, its scope and its label (scope, window,
    estimated or measured)."""
    e = row.get("energy") or {}
    window = e.get("headline_window") or "run"
    figures = (e.get("windows") or {}).get(window) or {}
    kind = "estimated" if e.get("estimated") else "measured"
    return figures, e.get("scope") or "unknown", f"{e.get('scope') or 'unknown'}, {window} window, {kind}"


def variable_names(row: dict) -> dict[str, str]:
    """caraml-compare's figure -> the performance variable's name for this row."""
    work = (row.get("throughput") or {}).get("unit") or "work"
    return {figure: name.format(work=work) for figure, name in FIGURE_VARIABLES.items()}


def perf_values(row: dict) -> dict[str, tuple[float, str]]:
    """The row's figures as performance variables: name -> (value, unit).
    Every benchmark has the same variables in every run (MFU the LLM's
    only); a figure the row lacks is NaN."""
    t, m = row.get("throughput") or {}, row.get("mfu") or {}
    work = t.get("unit") or "work"
    device = (row.get("system") or {}).get("device_unit") or "device"
    figures, _, label = _energy(row)
    names = variable_names(row)
    values = {
        names["throughput"]: (t.get("per_s"), f"{work}/s"),
        names["throughput_per_device"]: (t.get("per_s_per_device"), f"{work}/s per {device}"),
        names["throughput_per_node"]: (t.get("per_s_per_node"), f"{work}/s per node"),
        names["mfu"]: (m.get("value"), "fraction of peak"),
        names["work_per_wh"]: (figures.get("work_per_wh"), f"{work}/Wh ({label})"),
        "power_w_per_device": (figures.get("mean_power_w_per_device"), f"W per {device} ({label})"),
    }
    entry = benchmarks.find(row.get("benchmark"))
    if entry is None or not entry.mfu:
        del values[names["mfu"]]
    return {name: (_number(v) if _number(v) is not None else math.nan, unit)
            for name, (v, unit) in values.items()}


def missing(row: dict) -> dict[str, str]:
    """The performance variables the row has no figure for (NaN in the
    perflog), each with why: the row's own flag that says it (an MFU
    refused on a busy host), else that the row has none."""
    flags = row.get("flags") or []
    out = {}
    for name, (value, _) in perf_values(row).items():
        if math.isnan(value):
            said = [f for f in flags if f.startswith(f"{name}-not-available(")]
            out[name] = said[0] if said else f"the row has no {name} figure"
    return out


def load_references(extra: list[Path] | None = None, suite: bool = True) -> pd.DataFrame:
    """caraml-compare's reference file (unless suite is false) and any extra
    ones (a centre's own measurements), read and checked by caraml-compare's
    reader."""
    frames = ([reference.load()] if suite else []) + [reference.load(Path(path)) for path in extra or []]
    return pd.concat([f for f in frames if not f.empty] or [reference.load_empty()], ignore_index=True)


def references(row: dict, refs: pd.DataFrame, key: str) -> dict[str, dict[str, tuple]]:
    """ReFrame's reference for this row, {key: {variable: (value, -lower,
    upper, unit)}}: each reference that caraml-compare would check this row
    against, with its band as fractions of the value (ReFrame's lower
    threshold is negative). Where two references give one figure, the later
    (an extra file's) wins."""
    line = flatten(row, RunDir(Path(row.get("work_package") or "."), None), Path("row.json"))
    checks = reference.verdicts(pd.DataFrame([line]), refs)
    names, units = variable_names(row), {n: u for n, (_, u) in perf_values(row).items()}
    out = {}
    for _, check in checks.iterrows():
        name = names[check["figure"]]
        value = float(check["reference"])
        # the band's fractions back from its bounds, without the float noise of the division
        out[name] = (value, round(check["low"] / value - 1, 12), round(check["high"] / value - 1, 12),
                     units.get(name))
    return {key: out} if out else {}


def reframe_reference(row: dict, refs: pd.DataFrame, key: str, xfail) -> dict[str, dict]:
    """ReFrame's whole reference for this row: the bands of references(),
    and each figure the row lacks (NaN in the perflog, whose columns never
    change) as an expected failure that says why, made by ReFrame's
    builtin xfail(message, reference), which the check passes in. ReFrame
    turns the dict into its scoped form when the check assigns it, so it is
    made whole here."""
    out = references(row, refs, key)
    units = {name: unit for name, (_, unit) in perf_values(row).items()}
    for name, why in missing(row).items():
        out.setdefault(key, {})[name] = xfail(why, (0, None, None, units[name]))
    return out


def provenance(row: dict) -> dict[str, str]:
    """What the perflog says of where the row came from, one text each."""
    prov, e = row.get("provenance") or {}, row.get("energy") or {}
    status = row.get("status") or {}
    _, scope, _ = _energy(row)
    fields = {
        "commit": prov.get("commit"), "suite_version": prov.get("suite_version"),
        "torch": prov.get("torch"),
        "energy_source": e.get("methods"), "energy_scope": scope if e else None,
        "energy_kind": None if not e else "estimated" if e.get("estimated") else "measured",
        "energy_window": e.get("headline_window"),
        "system": (row.get("system") or {}).get("name"),
        "config": (row.get("config") or {}).get("label"),
        "flags": " ".join(row.get("flags") or []) or "none",
        "status": status.get("state"),
    }
    return {name: str(fields[name]) if fields[name] not in (None, "") else "n/a" for name in PROVENANCE}
