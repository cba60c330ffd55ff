"""Printing a decided row: the single-word fields of the `CARAML row:` line
that JUBE's patterns read (platform.xml's rowPatterns), and the reason and
flags lines. Standard library only (login node)."""

from __future__ import annotations

import sys
import textwrap

from caraml import report
from caraml.report import MEMORY


def _source(energy: dict) -> str:
    """How the energy was had, in one word: incomplete, estimated or measured."""
    return ("incomplete" if energy.get("incomplete") else
            "estimated" if energy.get("estimated") else "measured")


def _pairs(values: dict | None) -> str | None:
    """A mapping as one word: name=value;name=value."""
    return ";".join(f"{k}={v:.6g}" for k, v in values.items() if v is not None) if values else None


# The single-word fields of the `CARAML row:` line, by the name the tables' patterns use
def table_fields(row: dict) -> dict[str, object]:
    e = row["energy"] or {}
    window = (e.get("windows") or {}).get(e.get("headline_window")) or {}
    run = (e.get("windows") or {}).get("run") or {}
    timed = (e.get("windows") or {}).get("timed") or {}
    t = row["throughput"] or {}
    m = row["mfu"] or {}
    memory = row.get("memory") or {}
    limit = row.get("power_limit") or {}
    system, config = row["system"], row["config"]
    scope = e.get("scope")
    if scope and e.get("headline_window") != "timed":
        scope += "(run)"
    values = {
        "state": row["status"]["state"],
        "notable": "yes" if row["status"]["state"] != "ok" or row["flags"] else "no",
        "layout": f"{system['nodes'] or '?'}x{system['devices_per_node'] or '?'}",
        "model": config["model"], "precision": config["precision"],
        "global_batch": config["global_batch"],
        "per_s": t.get("per_s"), "per_s_per_device": t.get("per_s_per_device"),
        "mfu": m.get("value"), "peak_tflops": m.get("peak_tflops"),
        "peak_basis": m.get("peak_basis"),
        "power_w_per_device": window.get("mean_power_w_per_device"),
        # a power-limit sweep's point as asked, and the limit the device reported at its scope
        "power_limit": limit.get("asked"), "power_limit_w": limit.get("reported_w"),
        "power_limit_scope": limit.get("scope"),
        "work_per_wh": window.get("work_per_wh"), "wh": window.get("wh"),
        "energy_scope": scope,
        "energy_kind": None if not e else "estimated" if e.get("estimated") else "measured",
        "energy_window": e.get("headline_window"),
        "wh_run": run.get("wh"), "work_per_wh_run": run.get("work_per_wh"),
        "wh_per_device_run": run.get("wh_per_device"),
        "wh_timed": timed.get("wh"), "work_per_wh_timed": timed.get("work_per_wh"),
        "energy_source": f"{_source(e)}({e.get('methods') or '-'})" if e else None,
        "energy_devices": f"{e.get('devices')}x{e.get('scope')}" if e.get("devices") else None,
        "energy_methods": e.get("methods"), "energy_basis": e.get("basis"),
        "energy_by_scope": _pairs(e.get("by_scope")), "energy_by_node": _pairs(e.get("by_node")),
        "time_per_iteration_s": t.get("time_per_iteration_s"),
        "timed_iterations": t.get("iterations"),
        **{f"memory_{name}": memory.get(name) for name in MEMORY},
        "commit": row["provenance"].get("suite_version"), "torch": row["provenance"].get("torch"),
        "date": row["provenance"].get("date"),
    }
    values["mfu"] = None if values["mfu"] is None else round(values["mfu"], 3)
    power = values.pop("power_w_per_device")
    # watts to one decimal in every row, so a column of them lines up
    fields = {k: _short(v) if isinstance(v, float) else report.word(v) for k, v in values.items()}
    fields["power_w_per_device"] = "-" if power is None else f"{power:.1f}"
    return fields


def _short(value: float) -> str:
    """A table's figure: whole numbers from 1000 up, else five digits."""
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.5g}"


def print_lines(row: dict, file=None) -> None:
    """The lines the JUBE tables read: single words in `CARAML row:`, the
    free texts each on a line of its own (JUBE's patterns take the rest of
    the line; commas become semicolons); an ok row's reason is empty."""
    # an unknown value is left out of the line: its cell stays empty
    _write({k: v for k, v in table_fields(row).items() if v not in (None, "-")},
           row["status"]["reason"], row["flags"], file)


def print_build(state: str, reason: str, file=None) -> None:
    """A container build job's lines: its state and reason alone."""
    _write({"state": state, "notable": "no" if state == "built" else "yes"}, reason, [], file)


# JUBE's pretty tables show a cell of several lines one line under the
# other: a reason or list of flags wrapped at this width keeps the issues
# table within 160 characters (row.json and the full table keep them whole)
CELL_WIDTH = 36


def _cell(text: str) -> str:
    """Free text as lines of at most CELL_WIDTH characters (a longer word,
    a path, stays whole; a flag breaks at its hyphens), each after the
    first starting with two spaces (rowPatterns read them as one value)."""
    return "\n  ".join(textwrap.wrap(text, CELL_WIDTH, break_long_words=False))


def _write(fields: dict, reason: str, flags: list[str], file) -> None:
    file = file or sys.stdout
    report.write_line(report.line("row", fields), file)
    report.write_line("CARAML row reason: " + _cell(report.one_line(reason)), file)
    report.write_line("CARAML row flags: " + (_cell(" ".join(flags)) or "none"), file)
