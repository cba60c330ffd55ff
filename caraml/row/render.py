"""Every way a row is shown, from its record (caraml/row/record.py) and in
this one module: the words of the JUBE row line, which the full table's
cells are too (caraml/row/full_table.py); the history's typed columns;
caraml-compare's line; ReFrame's performance variables. Each field of the
record keeps its name in every one of them; what no field holds (the
layout, whether a row is notable, the energy's labels) is made here from
fields, once. Nothing here decides: a window, a status or a verdict is the
record's. Standard library only (login node)."""

from __future__ import annotations

import json
import math
from typing import Any

from caraml import benchmarks, report
from caraml.row import verdict
from caraml.row.record import FIELDS, KINDS, Row
from caraml.row.status import RAN

# the fields with lines of their own (free text a JUBE cell wraps; a
# history error is said in the cause's)
OWN_LINES = ("reason", "flags", "history_error")
HISTORY_NOT_WRITTEN = "not in the results history"
SQL_TYPES = {"number": "REAL", "whole": "INTEGER", "flag": "INTEGER", "text": "TEXT", "words": "TEXT",
             "pairs": "TEXT"}


def _short(value: float) -> str:
    """A table's figure: whole numbers from 1000 up, else five digits."""
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.5g}"


def pairs(values: dict) -> str | None:
    """A mapping as one word: name=value;name=value (numbers as the line has them)."""
    return ";".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={report.word(v)}"
                    for k, v in values.items() if v is not None) or None


def _word(name: str, value: Any) -> str | None:
    """A field's value as one word of the row line (None: unknown). Watts
    to one decimal in every row, so a column of them lines up; MFU to three.
    A number that is not finite is unknown: JUBE's typed patterns take
    every number of the line, and JUBE 2.5.1 cannot read its own record of
    a nan or inf back (`jube result` then fails for the whole run)."""
    kind = KINDS[name]
    if value is None or value == () or value == {}:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if kind == "pairs":
        return pairs(value)
    if kind == "words":
        return report.word(" ".join(value))
    if kind == "flag":
        return "yes" if value else "no"
    if name.startswith("power_w_per_device"):
        return f"{value:.1f}"
    if name == "mfu":
        return _short(round(value, 3))
    if kind == "number":
        return _short(value)
    return _text(value)


def _text(value: object) -> str | None:
    """Free text as one word without `=`, which the tables' patterns take for the next field."""
    return None if value is None else report.word(value).replace("=", "%3D")


# How a row's headline energy was had, in jpwr's words (its summary's
# `source`): an estimate, whole or not; a measurement of part of its window
# (the share it covers is in the row's flags); a measurement of all of it.
ESTIMATED, INCOMPLETE, MEASURED = "estimated", "incomplete", "measured"


def energy_kind(row: Row) -> str | None:
    """How the headline energy was had: ESTIMATED, INCOMPLETE or MEASURED;
    None for a row without energy."""
    if row.energy_scope is None:
        return None
    if row.energy_estimated:
        return ESTIMATED
    return MEASURED if verdict.energy_whole(row) else INCOMPLETE


def notable(row: Row) -> bool:
    """Whether the `issues` table lists the row: it is no plain measurement."""
    return row.state != "ok" or bool(row.flags) or not row.measurement or bool(row.history_error)


def verdict_word(row: Row) -> str:
    """The word of the rule whose verdict the row holds (its
    not_a_measurement, decided once): the rule that words it so, else
    verdict.OTHER. It names the verdict the row carries, never a new one."""
    return next((word for word, rule in verdict.RULES if rule(row) == row.not_a_measurement), verdict.OTHER)


def status(row: Row) -> str:
    """The Status cell of the result tables: the state, and for a row that
    ran to its figures and is no measurement the word of its verdict
    (`ok (short)`); the issues table's cause says the verdict whole."""
    if row.state in RAN and not row.measurement:
        return f"{row.state} ({verdict_word(row)})"
    return row.state


def own_columns(benchmark: str | None) -> dict[str, str]:
    """slot -> field of each of the benchmark's own columns that has a JUBE
    slot (own1, ...; caraml/benchmarks.py OWN_SLOTS), in its entry's order."""
    try:
        entry = benchmarks.find(benchmark)
    except benchmarks.UnknownBenchmark:  # a site's registry that fails: the row's cause names it
        entry = None
    sourced = [column.field for column in entry.table_columns if column.source] if entry else []
    return {f"own{i}": field for i, field in enumerate(sourced[:benchmarks.OWN_SLOTS], 1)}


def labels(row: Row) -> dict[str, str | None]:
    """What the tables show that no field holds, each made from fields."""
    scope, kind = row.energy_scope, energy_kind(row)
    return {"notable": "yes" if notable(row) else "no",
            **{slot: _text(row.details.get(field)) for slot, field in own_columns(row.benchmark).items()},
            "layout": f"{row.nodes or '?'}x{row.devices_per_node or '?'}",
            "energy_kind": kind,
            # the kind with the methods: measured(pynvml), estimated(estimate)
            "energy_source": f"{kind}({row.energy_methods or '-'})" if kind is not None else None,
            # the headline's scope, marked where it covers the whole run, not the timed iterations
            "energy_scope_shown": scope + ("" if row.energy_window == "timed" else "(run)")
            if scope is not None else None,
            "energy_devices_shown": f"{row.energy_devices}x{row.energy_scope}"
            if row.energy_devices else None}


def words(row: Row) -> dict[str, str]:
    """The row line's words: the state first (the tables' patterns start
    there), then every field and label the row knows; the reason and the
    flags have lines of their own."""
    values = {"state": report.word(row.state), **labels(row)}
    values.update({name: _word(name, getattr(row, name)) for name in FIELDS
                   if name not in values and name not in OWN_LINES})
    return {name: value for name, value in values.items() if value is not None and value != "-"}


def cause(row: Row) -> str:
    """The `issues` table's cause: the status's reason, the verdict on a
    row whose job ran to its figures and is no measurement (another row's
    state and reason say why already), and why the row is not in the
    results history."""
    ran = row.state in RAN
    judged = verdict.shown(row.not_a_measurement) if ran and not row.measurement else ""
    history = f"{HISTORY_NOT_WRITTEN}: {row.history_error}" if row.history_error else ""
    return "; ".join(filter(None, [row.reason, judged, history]))


def history_columns() -> list[tuple[str, str]]:
    """The history's column of each field, with its SQLite type."""
    return [(name, SQL_TYPES[KINDS[name]]) for name in FIELDS]


def history_values(row: Row) -> dict[str, object]:
    """Each field as its history column holds it: NULL for an unknown or
    empty one (never ''), flags as words, a mapping as JSON."""
    out = {}
    for name in FIELDS:
        value, kind = getattr(row, name), KINDS[name]
        if kind == "words":
            value = " ".join(value) or None
        elif kind == "pairs":
            value = json.dumps(value, sort_keys=True) if value else None
        elif kind == "flag" and value is not None:
            value = int(value)
        out[name] = None if value == "" else value
    return out


def compare_values(row: Row) -> dict[str, object]:
    """Each field as a line of caraml-compare holds it: an unknown number is
    NaN, an unknown text `n/a`, the flags words, a mapping its one word."""
    out = {}
    for name in FIELDS:
        value, kind = getattr(row, name), KINDS[name]
        if kind in ("number", "whole"):
            value = math.nan if value is None else float(value)
        elif kind == "words":
            value = " ".join(value)
        elif kind == "pairs":
            value = pairs(value) or ""
        elif kind == "text" and value is None:
            value = "n/a"
        out[name] = value
    return out


# ReFrame's performance variables: the field each carries ({work}: the row's
# unit of work). A benchmark's variables are the same in every run, so its
# perflog's columns never change: the energy's scope, window and kind are in
# the unit and the perflog's provenance fields.
PERFORMANCE = {"{work}_per_s": "per_s", "{work}_per_s_per_device": "per_s_per_device",
               "{work}_per_s_per_node": "per_s_per_node", "mfu": "mfu", "{work}_per_wh": "work_per_wh",
               "power_w_per_device": "power_w_per_device"}
# ... and where the job's cluster meters whole nodes (Slurm's energy
# accounting, caraml/job/node_energy.py), the nodes' energy over the job
# and the run's work over it: a cluster's plugin is the same for every job
# of a partition, so its perflog's columns stay the same too
NODE_PERFORMANCE = {"node_wh": "node_wh", "{work}_per_node_wh": "work_per_node_wh"}
NODE_SCOPE = "node"


def energy_label(row: Row) -> str:
    kind = "estimated" if row.energy_estimated else "measured"
    return f"{row.energy_scope or 'unknown'}, {row.energy_window or 'run'} window, {kind}"


def node_label(row: Row) -> str:
    return (f"{row.node_energy_scope}, {row.node_energy_window or 'job'} window, "
            f"{row.node_energy_source or 'slurm'}")


def performance(row: Row) -> dict[str, tuple[float, str, str]]:
    """ReFrame's performance variables of the row: name -> (value, unit, the
    field it carries). Every benchmark has the same variables in every run
    (MFU the LLM's only), and the nodes' energy where the cluster meters
    whole nodes; a figure the row lacks is NaN, and so is every figure of a
    row that is no measurement."""
    work = row.unit or "work"
    device = row.device_unit or "device"
    units = {"per_s": f"{work}/s", "per_s_per_device": f"{work}/s per {device}",
             "per_s_per_node": f"{work}/s per node", "mfu": "fraction of peak",
             "work_per_wh": f"{work}/Wh ({energy_label(row)})",
             "power_w_per_device": f"W per {device} ({energy_label(row)})",
             "node_wh": f"Wh of the nodes ({node_label(row)})",
             "work_per_node_wh": f"{work}/Wh of the nodes ({node_label(row)}, the run's {work})"}
    entry = benchmarks.find(row.benchmark)
    variables = {**PERFORMANCE, **(NODE_PERFORMANCE if row.node_energy_scope == NODE_SCOPE else {})}
    out = {}
    for name, field in variables.items():
        if field == "mfu" and (entry is None or not entry.mfu):
            continue
        value = getattr(row, field)
        out[name.format(work=work)] = (float(value) if row.measurement and value is not None else math.nan,
                                       units[field], field)
    return out


def missing(row: Row) -> dict[str, str]:
    """The performance variables the row has no figure for, each with why:
    the verdict where the row is no measurement, else the row's own flag
    that says it (an MFU refused on a busy host), else why its node meter
    gave none, else that it has none."""
    out = {}
    for name, (value, _, field) in performance(row).items():
        if not math.isnan(value):
            continue
        said = [f for f in row.flags if f.startswith(f"{name}-not-available(")]
        node = row.node_energy_reason if field in NODE_PERFORMANCE.values() else None
        out[name] = (verdict.shown(row.not_a_measurement) if not row.measurement
                     else said[0] if said else node if node else f"the row has no {name} figure")
    return out
