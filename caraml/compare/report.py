"""The comparison's tables as CSV and markdown, and one self-contained HTML
page with the tables and the plots embedded (no external links)."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd

from caraml.compare.figures import energy_kind

NA = "n/a"
ENERGY_FIGURES = ("energy_per_device_wh", "energy_per_node_wh", "work_per_wh", "mean_power_w_per_device",
                  "estimated_energy_kwh", "estimated_action_kwh_h")
ENERGY_RATIOS = ("energy_per_device_wh_ratio", "work_per_wh_ratio", "mean_power_w_per_device_ratio")
WINDOW = ("Energy window: each row's measured training run (warm-up included) as jpwr measured it, "
          "summed over the job's devices; scope: the EnergyScope column where the table has one (else n/a).")


def _number(value) -> str:
    if isinstance(value, str):
        return value
    if pd.isna(value):
        return NA
    return f"{value:.4g}"


def _with_energy_kind(frame: pd.DataFrame, display: pd.DataFrame) -> None:
    """Every energy figure from an estimated source says so in its cell."""
    estimated = (frame["energy_source"].map(energy_kind) == "estimated").to_numpy()
    if "reference_energy_source" in frame:
        ref_estimated = (frame["reference_energy_source"].map(energy_kind) == "estimated").to_numpy()
    else:
        ref_estimated = estimated
    for column in (*ENERGY_FIGURES, *ENERGY_RATIOS):
        if column in display:
            mask = (estimated | ref_estimated) if column in ENERGY_RATIOS else estimated
            display[column] = [f"{v} (estimated)" if est and v != NA else v
                               for v, est in zip(display[column], mask)]


def comparison_display(rows: pd.DataFrame, benchmark: str) -> pd.DataFrame:
    group = rows[rows["benchmark"] == benchmark]
    unit = group["unit"].iloc[0]
    columns = {
        "system": "system", "config": "configuration", "nodes": "nodes", "devices": "devices",
        "global_batch": "global batch", "throughput_per_device": f"{unit}/s/device",
        "throughput_per_device_ratio": "/device x ref", "throughput_per_node": f"{unit}/s/node",
        "throughput_per_node_ratio": "/node x ref", "mfu": "MFU", "mfu_ratio": "MFU x ref",
        "energy_per_device_wh": "Wh/device", "energy_per_node_wh": "Wh/node",
        "work_per_wh": f"{unit}/Wh", "work_per_wh_ratio": "/Wh x ref",
        "mean_power_w_per_device": "W/device", "energy_source": "energy source",
        "energy_scope": "energy scope",
        "verdict": "verdict", "best": "best", "flags": "flags", "status": "status",
    }
    if group["mfu"].isna().all():  # the image benchmark has no MFU
        columns = {k: v for k, v in columns.items() if not k.startswith("mfu")}
    display = group[list(columns)].copy()
    for column in display.columns:
        if column not in ("best",):
            display[column] = display[column].map(_number)
    _with_energy_kind(group, display)
    display["best"] = display["best"].map({True: "best", False: ""})
    return display.rename(columns=columns)


def solution_display(table: pd.DataFrame) -> pd.DataFrame:
    display = table[["system", "benchmark", "config", "case", "from_global_batch", "from_devices", "job",
                     "estimated_time_h", "estimated_energy_kwh", "estimated_action_kwh_h", "energy_basis",
                     "energy_source", "label"]].copy()
    for column in display.columns:
        display[column] = display[column].map(_number)
    _with_energy_kind(table, display)
    return display.rename(columns={"from_global_batch": "measured at batch", "from_devices": "on devices",
                                   "estimated_time_h": "time to solution (h estimate)",
                                   "estimated_energy_kwh": "energy to solution (kWh estimate)",
                                   "estimated_action_kwh_h": "energy x time (kWh h estimate)",
                                   "energy_basis": "energy per work from", "energy_source": "energy source",
                                   "label": "figures are"})


def plain_display(table: pd.DataFrame) -> pd.DataFrame:
    return table.apply(lambda column: column.map(_number)) if not table.empty else table


def markdown(display: pd.DataFrame) -> str:
    def line(cells) -> str:
        return "| " + " | ".join(str(c).replace("|", "/").replace("\n", " ") for c in cells) + " |"
    header = list(display.columns)
    return "\n".join([line(header), line(["---"] * len(header)),
                      *(line(r) for r in display.itertuples(index=False))]) + "\n"


def _image(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}"></figure>'


CSS = """
body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1400px}
table{border-collapse:collapse;font-size:11px;margin:0.5em 0 1.5em}
th,td{border:1px solid #bbb;padding:2px 6px;text-align:right}
th{background:#eee}td:first-child,td:nth-child(2){text-align:left}
.note{background:#fff6d8;border-left:4px solid #e0b000;padding:0.4em 0.8em;font-size:13px}
img{max-width:100%;border:1px solid #ddd}
.wide{overflow-x:auto}
"""


def html_page(title: str, sections: list[tuple[str, list]]) -> str:
    """sections: (heading, parts), a part being a note (str), a table (DataFrame) or a PNG (Path)."""
    body = [f"<h1>{html.escape(title)}</h1>"]
    for heading, parts in sections:
        body.append(f"<h2>{html.escape(heading)}</h2>")
        for part in parts:
            if isinstance(part, pd.DataFrame):
                body.append(f'<div class="wide">{part.to_html(index=False, na_rep=NA, border=0)}</div>'
                            if not part.empty else "<p>none</p>")
            elif isinstance(part, Path):
                body.append(_image(part))
            else:
                body.append(f'<p class="note">{html.escape(part)}</p>')
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>\n")


ESTIMATE_NOTE = ("Time and energy to solution are estimates, extrapolated from measured rates: the job's "
                 "work divided by the measured throughput and by the measured work per Wh (of the timed "
                 "iterations where the table has it). Energy that was "
                 "itself estimated (no power sensor) stays marked (estimated).")
