"""The comparison's tables for people (3 significant digits with units,
energy labelled with scope, window and whether it was estimated), as
markdown and as one self-contained HTML page rendered from a Jinja2
template (templates/report.html.j2)."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from pathlib import Path

import jinja2
import pandas as pd

from caraml.compare.figures import NOT_REPRESENTATIVE
from caraml.compare.rows import Line, cause, measured
from caraml.compare.units import NA, count, duration, energy, number
from caraml.row.status import RAN
from caraml.row.verdict import MIN_TIMED_ITERATIONS, MIN_TIMED_SECONDS

METHOD = [
    "Like for like: rows are compared only within one benchmark, model, precision and sequence length or "
    "image size (operator rows: one problem, named in the model, and one compile mode); the headline "
    "takes each system's row with the highest throughput per device and names its batch and device "
    "count.",
    "Ratios (x ref) divide a system's figure by the reference system's figure of the same like-for-like "
    "group (headline) or of the same group, global batch and node count (all rows). Energy figures are "
    "divided only within one energy scope and window, MFU only between rows against the same kind of "
    "peak (datasheet or measured matmul); every refusal is listed under the headline. In the headline a "
    "ratio carries its 95 % interval in parentheses, from the runs of both sides, or 'no interval' where "
    "both rest on one run, or one on one run whose row records no spread of its timed iterations.",
    "Energy: each row's headline window (timed: the timed iterations only; run: the whole training run, "
    "warm-up included), summed over the energy devices the row names, at the scope the row names (gpu: "
    "the accelerators alone; module: a superchip with its CPU and memory; host or cpu: the node's CPU "
    "package). Estimated energy (no power sensor: jpwr's utilisation model) is marked estimated "
    "wherever it appears, and so is any ratio with an estimated side.",
    "Node energy: the centre's meter as Slurm's energy accounting reads it (node scope, job window: the job "
    "script's run, start-up included, summed over the job's nodes), a figure of its own beside the "
    "accelerators', never added to them; work per node-Wh is ranked and divided only where every system has "
    "it over the same window. The accelerators' share of node energy is jpwr's, where it measured both over "
    "the run.",
    "MFU: model FLOP/s per device over the peak in the peak column; the basis says whether that peak is "
    "the datasheet's dense figure or a matmul rate measured on the node.",
    "Measurements only: a row of fewer than {} timed iterations or {:g} timed seconds, or whose energy is "
    "not whole, is shown marked 'not a measurement' with why, and never ranked, divided or "
    "extrapolated.".format(MIN_TIMED_ITERATIONS, MIN_TIMED_SECONDS),
    "Time and energy to solution are estimates extrapolated from measured rates, given only for the "
    "configurations that stand for the job (the 800M GPT at sequence 2048, ResNet-50 at 224 px, the FNO "
    "on the 3D convection problem rbc3d).",
]
SOLUTION_NOTE = ("Estimates: the job's work over the measured throughput and over the measured work per Wh "
                 "(timed window where the row has it). Other configurations say 'not representative'.")


SWEEP_NOTE = ("Each system is ranked by its run at the devices' own limit; the capped points of its sweep "
              "are shown here only. Time and energy to solution are estimates: the job's work over each "
              "point's measured throughput and work per Wh (timed window where the row has it). Only "
              "measurements whose limit was restored go on the frontier: a row that is no measurement is "
              "left out of it and out of the chart (never extrapolated), a failed point or one whose limit "
              "was not restored is listed with its reason (crossed in the chart where it has figures). "
              "Ratios to the default limit are taken within one energy scope and window.")


def slug(text: str) -> str:
    """text as a file name's or an HTML id's part: every character but letters and digits an underscore."""
    return "".join(c if c.isalnum() else "_" for c in text)


def _e(value: object, unit: str = "") -> str:
    return value if isinstance(value, str) else number(value, unit)


def configuration(row: Line) -> str:
    """A row's configuration, batch and layout in words."""
    nodes = row["nodes"]
    return (f"{row['like']}, batch {row['global_batch']:g}, {row['devices']:g} {row['device_unit']}"
            f"{'' if row['devices'] == 1 else 's'} on {nodes:g} node{'' if nodes == 1 else 's'}")


def _ratio(value: float | None, estimated: bool = False) -> str:
    if pd.isna(value):
        return NA
    return f"{number(value)}x" + (" (estimated)" if estimated else "")


def _x_ref(row: Line, column: str, estimated: bool = False) -> str:
    """A ratio to the reference system with its 95 % interval where the
    line has one (the headline's: `2.45x (2.38–2.52)`), `no interval` where
    its runs give none (the decision's sentences say why)."""
    value, low, why = row.get(column), row.get(f"{column}_low"), row.get(f"{column}_no_interval")
    if value is None or pd.isna(value) or low is None or (pd.isna(low) and not why):
        return _ratio(value, estimated)
    within = "no interval" if pd.isna(low) else f"{number(low)}–{number(row[f'{column}_high'])}"
    return f"{number(value)}x ({within}{', estimated' if estimated else ''})"


def _energy_cells(row: Line) -> dict:
    kind = "estimated" if row["energy_estimated"] else "measured"
    if row["energy_scope"] == NA:
        return {"energy": NA}
    return {"energy": f"{kind}, scope {row['energy_scope']}, {row['energy_window']} window, "
                      f"{row['energy_devices']:g} energy devices ({row['energy_methods']})"}


def _per(value: float, per: str) -> str:
    """A per-unit figure with its unit (MI250: per GCD, GH200: per superchip)."""
    return NA if pd.isna(value) else f"{number(value)} per {per}"


def per_wh_title(unit: str, scope: str, window: str) -> str:
    return f"{unit}/Wh, {scope} scope, {window} window"


def _per_wh(unit: str, scope: str, window: str, value: float, est: str) -> dict:
    if scope == NA:
        return {}
    return {per_wh_title(unit, scope, window): NA if pd.isna(value) else number(value) + est}


def _node_cells(row: Line, unit: str) -> dict:
    """Work per node-Wh (the centre's meter, its own scope and window) and
    its ratio where the row has it, and the accelerators' share of the node
    energy where jpwr measured both; nothing where the row has neither."""
    cells: dict[str, str] = {}
    if pd.notna(row["work_per_node_wh"]):
        cells[per_wh_title(unit, "node", row["node_energy_window"])] = number(row["work_per_node_wh"])
        cells["per node-Wh x ref (node scope, same window)"] = _x_ref(row, "work_per_node_wh_ratio")
    if pd.notna(row["accelerator_share_of_node_pct"]):
        cells["accelerators' share of node energy"] = (f"{number(row['accelerator_share_of_node_pct'])} % "
                                                       f"({row['accelerator_share_basis']}, jpwr)")
    return cells


def node_energy(row: Line) -> str:
    """The row's node energy in words: its figure with scope, window and
    source, or its state and why there is none."""
    if pd.notna(row["node_wh"]):
        return (f"{energy(row['node_wh'])}, {row['node_energy_scope']} scope, {row['node_energy_window']} "
                f"window, {number(row['node_power_w_per_node'], 'W')} per node ({row['node_energy_source']})")
    if row["node_energy_state"] == NA:
        return "not recorded"
    reason = row["node_energy_reason"]
    return row["node_energy_state"] + ("" if reason == NA else f": {reason}")


def _row_cells(row: Line, unit: str, headline: bool) -> dict:
    if row["state"] not in RAN:
        return {"system": row["system"], "configuration": row.get("like", NA),
                "status": f"{row['state']}: {row['reason']}".rstrip(": ")}
    est = " (estimated)" if row["energy_estimated"] else ""
    cells = {
        "system": row["system"], "configuration": configuration(row),
        "status": cause(row) if not row["measurement"]
        else row["state"] + (f": {row['reason']}" if row["reason"] else ""),
        f"{unit}/s per node": _e(row["per_s_per_node"]),
        "per node x ref": _x_ref(row, "per_s_per_node_ratio"),
        f"{unit}/s per package": _per(row["per_s_per_package"], row["package_unit"]),
        "per package x ref": _x_ref(row, "per_s_per_package_ratio"),
        f"{unit}/s per device": _per(row["per_s_per_device"], row["device_unit"]),
        "per device x ref": _x_ref(row, "per_s_per_device_ratio"),
        f"{unit}/s whole job": _e(row["per_s"]),
        "MFU": number(row["mfu"]),
        "peak TFLOP/s per device": number(row["peak_tflops"]),
        "peak basis": row["peak_basis"],
        "MFU x ref": _x_ref(row, "mfu_ratio"),
        # a column per energy scope and window, never two scopes in one
        **_per_wh(unit, row["energy_scope"], row["energy_window"], row["work_per_wh"], est),
        "per Wh x ref (same scope and window)": _x_ref(row, "work_per_wh_ratio",
                                                       bool(row.get("ratio_estimated"))),
        **_per_wh(unit, "gpu", "run", row["work_per_wh_gpu"], est),
        "GPU-scope per Wh x ref": _x_ref(row, "work_per_wh_gpu_ratio", bool(row.get("ratio_estimated"))),
        **_node_cells(row, unit),
        "mean power per energy device": _e(row["power_w_per_device"], "W")
        + (est if not pd.isna(row["power_w_per_device"]) else ""),
        **_energy_cells(row),
        "verdict": row.get("verdict", NA),
        "flags": row["flags"],
    }
    if not headline:
        cells.update({"Wh by scope": row["energy_by_scope"] or NA, "node energy": node_energy(row)},
                     best="best" if row.get("best") else "",
                     refused=row.get("ratio_note", ""))
    return cells


def rows_display(table: pd.DataFrame, headline: bool) -> pd.DataFrame:
    if table.empty:
        return pd.DataFrame()
    units = table.loc[table["state"].isin(RAN), "unit"]
    unit = units.iloc[0] if not units.empty else "work"
    lines = [_row_cells(row, unit, headline) for _, row in table.iterrows()]
    columns = _together(list(dict.fromkeys(c for line in lines for c in line)), f"{unit}/Wh, ")
    return pd.DataFrame(lines, columns=columns).fillna(NA)


def _together(columns: list[str], prefix: str) -> list[str]:
    """The columns of every scope and window of one figure side by side, where the first of them stands."""
    alike = [c for c in columns if c.startswith(prefix)]
    if not alike:
        return columns
    first = columns.index(alike[0])
    rest = [c for c in columns if c not in alike]
    return rest[:first] + sorted(alike) + rest[first:]


def _values(series: pd.Series, unit: str = "") -> str:
    found = [_e(v, unit) if not isinstance(v, str) else v for v in dict.fromkeys(series.dropna())]
    return " / ".join(str(v) for v in found if v not in ("", NA)) or "not recorded"


def cards(rows: pd.DataFrame) -> list[dict]:
    """Per system: what it is and what its figures rest on."""
    out = []
    for system, group in rows.groupby("system", sort=False):
        ok = measured(group)
        src = ok if not ok.empty else group
        energy = sorted({"estimated" if e else "measured" for e in ok["energy_estimated"]}) if not ok.empty \
            else []
        items = {
            "system tag": _values(src["system_name"]), "description": _values(src["system_description"]),
            "devices": " / ".join(f"{d:g} {u}" for d, u in
                                  dict.fromkeys(zip(src["devices"], src["device_unit"])) if d == d)
            or "not recorded",
            "device kind": _values(src["device_kind"]),
            "nodes": " / ".join(f"{n:g}" for n in dict.fromkeys(src["nodes"].dropna())) or "not recorded",
            "TDP per device": _values(src["tdp_w"], "W"),
            "peak TFLOP/s per device (basis)": " / ".join(
                f"{number(p)} ({b})" for p, b in dict.fromkeys(zip(src["peak_tflops"], src["peak_basis"]))
                if p == p)
            or "not recorded",
            "driver": _values(src["driver"]), "CUDA / ROCm": _values(pd.concat([src["cuda"], src["rocm"]])),
            "torch": _values(src["torch"]), "suite version": _values(src["suite_version"]),
            "commit": " / ".join(f"{c}{'' if clean is not False else ' (uncommitted changes)'}"
                                 for c, clean in dict.fromkeys(zip(src["commit"], src["clean"]))),
            "container": _values(src["container"]), "date": _values(src["date"]),
            "energy methods": _values(src["energy_methods"]), "energy scope": _values(src["energy_scope"]),
            "energy is": " and ".join(energy) or NA,
            "node energy from": _values(src["node_energy_source"]),
            "rows": f"{len(ok)} measured of {len(group)}",
        }
        out.append({"name": system, "table": pd.DataFrame({"": list(items), " ": list(items.values())})})
    return out


def solution_display(table: pd.DataFrame) -> pd.DataFrame:
    if table.empty:
        return table
    lines = []
    for _, r in table.iterrows():
        est = " (estimated energy)" if r["energy_estimated"] else ""
        lines.append({"system": r["system"], "benchmark": r["benchmark"], "configuration": r["like"],
                      "case": r["case"], "measured at batch": f"{r['from_global_batch']:g}",
                      "on devices": f"{r['from_devices']:g}", "job": r["job"],
                      "time to solution": r["time_h"] if isinstance(r["time_h"], str)
                      else duration(r["time_h"] * 3600),
                      # one column per scope and window, never two scopes in one column
                      **({"energy to solution": NOT_REPRESENTATIVE} if isinstance(r["energy_kwh"], str)
                         else {f"energy to solution, {r['energy_scope']} scope, {r['energy_basis']}":
                               energy(r["energy_kwh"] * 1000) + est}),
                      **({} if isinstance(r["gpu_energy_kwh"], str) or pd.isna(r["gpu_energy_kwh"])
                         else {"energy to solution, gpu scope, whole run": energy(r["gpu_energy_kwh"] * 1000)
                               + est}),
                      **({} if isinstance(r["node_energy_kwh"], str) or pd.isna(r["node_energy_kwh"])
                         else {"energy to solution, node scope, job window":
                               energy(r["node_energy_kwh"] * 1000)}),
                      "figures are": r["label"]})
    columns = _together(list(dict.fromkeys(c for line in lines for c in line)), "energy to solution")
    return pd.DataFrame(lines, columns=columns).fillna("")


def _restored(row: Line) -> str:
    if row["limit_default"]:
        return "nothing set"
    return {True: "yes", False: "no"}.get(row["power_limit_restored"], "not recorded")


def sweep_display(points: pd.DataFrame) -> pd.DataFrame:
    """A power-limit sweep's points, lowest limit first: the limit as
    reported and as asked, whether it was restored, where the point stands
    on the frontier (or why it is off it), and its figures."""
    lines = []
    for _, r in points.iterrows():
        est = " (estimated)" if r["energy_estimated"] else ""
        where = f"{r['energy_scope']} scope, {r['sweep_basis']}"
        lines.append({
            "power limit per device": r["limit"], "limit before the job": _e(r["power_limit_before_w"], "W"),
            "restored": _restored(r),
            "on the frontier": r["standing"],
            f"{r['unit']}/s": _e(r["per_s"]),
            "time to solution": NA if pd.isna(r["time_h"]) else duration(r["time_h"] * 3600),
            "time x default": _ratio(r["time_ratio"]),
            **({} if r["energy_scope"] == NA else {
                f"{r['unit']}/Wh, {where}": NA if pd.isna(r["sweep_work_per_wh"])
                else number(r["sweep_work_per_wh"]) + est,
                f"energy to solution, {where}": NA if pd.isna(r["energy_kwh"])
                else energy(r["energy_kwh"] * 1000) + est}),
            "per Wh x default": _ratio(r["wh_ratio"], bool(r["energy_estimated"])),
            "mean power per energy device": NA if pd.isna(r["power_w_per_device"])
            else number(r["power_w_per_device"], "W") + est,
        })
    columns = list(dict.fromkeys(c for line in lines for c in line))
    columns = _together(_together(columns, "energy to solution"), f"{points['unit'].iloc[0]}/Wh, ")
    return pd.DataFrame(lines, columns=columns).fillna(NA)


# columns that hold counts, printed as they are (a batch of 1024 is never "1,020")
COUNTS = {"global_batch", "nodes", "devices", "base_devices", "runs", "size", "timed_iterations"}


def plain_display(table: pd.DataFrame) -> pd.DataFrame:
    def column(values: pd.Series) -> pd.Series:
        shown = count if values.name in COUNTS else number
        return values.map(lambda v: shown(v) if isinstance(v, (float, int)) and not isinstance(v, bool)
                          else v)
    return table.apply(column) if not table.empty else table


def markdown(display: pd.DataFrame) -> str:
    if display.empty:
        return "none\n"

    def line(cells: Iterable[object]) -> str:
        return "| " + " | ".join(str(c).replace("|", "/").replace("\n", " ") for c in cells) + " |"
    header = list(display.columns)
    return "\n".join([line(header), line(["---"] * len(header)),
                      *(line(r) for r in display.itertuples(index=False))]) + "\n"


def image(path: Path) -> dict:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return {"name": path.stem, "uri": f"data:image/png;base64,{data}"}


_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
                          autoescape=True, undefined=jinja2.StrictUndefined)


def page(template: str, **context: object) -> str:
    return _ENV.get_template(template).render(**context)


def html_page(**context: object) -> str:
    return page("report.html.j2", method=METHOD, solution_note=SOLUTION_NOTE, sweep_note=SWEEP_NOTE,
                **context)
