"""row.json: a row's record (caraml/row/record.py) as a file, schema
caraml-row/2, one key per field. A row.json of the schema before
(caraml-row/1, nested: system, config, throughput, mfu, energy with its
windows, power_limit, memory, status, provenance) is read into the same
record; a row of either schema is judged by today's verdict as it is read
(caraml/row/verdict.py), so runs of earlier years compare with today's
and stay in the history, and no written verdict is taken at its word. Standard
library only (login node)."""

from __future__ import annotations

import json
from pathlib import Path

from caraml.row.record import FIELDS, Row, gpu_work_per_wh, make, timed_span
from caraml.row.verdict import judged

SCHEMA = "caraml-row/2"
OLD_SCHEMA = "caraml-row/1"
FILE_NAME = "row.json"


def from_dict(data: dict) -> Row:
    """A row of either schema, judged again by today's verdict: a verdict
    written into the file is never taken (the audit names one its figures
    do not earn, caraml/audit)."""
    if not isinstance(data, dict):
        raise ValueError(f"not a row but {type(data).__name__}")
    if data.get("schema") == OLD_SCHEMA:
        return judged(_from_old(data))
    if data.get("schema") != SCHEMA:
        raise ValueError(f"schema {data.get('schema')!r}, not {SCHEMA!r} or {OLD_SCHEMA!r}")
    return judged(make({name: data[name] for name in FIELDS if name in data}))


def to_dict(row: Row) -> dict:
    return {"schema": SCHEMA, **{name: getattr(row, name) for name in FIELDS}}


def to_json(row: Row) -> str:
    return json.dumps(to_dict(row), sort_keys=True)


def from_json(text: str) -> Row:
    """A row from its JSON text (ValueError where the text holds none)."""
    try:
        return from_dict(json.loads(text))
    except TypeError as err:
        raise ValueError(str(err)) from None


def read(path: Path) -> Row:
    """A row.json of either schema; ValueError says what is wrong."""
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise ValueError(f"{path}: cannot read it ({err.strerror})") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not JSON ({err})") from None
    try:
        return from_dict(data)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path}: {err}; run `jube result -a` with this suite's version") from None


def write(row: Row, folder: Path) -> Path:
    path = folder / FILE_NAME
    path.write_text(json.dumps(to_dict(row), indent=1) + "\n")
    return path


def _part(data: dict, *keys: str) -> dict:
    found: object = data
    for key in keys:
        found = found.get(key) if isinstance(found, dict) else None
    return found if isinstance(found, dict) else {}


def _from_old(data: dict) -> Row:
    """A caraml-row/1 row.json as the record."""
    system, config, tput = _part(data, "system"), _part(data, "config"), _part(data, "throughput")
    mfu, peak = _part(data, "mfu"), _part(data, "mfu", "measured_peak")
    energy, limit, memory = _part(data, "energy"), _part(data, "power_limit"), _part(data, "memory")
    status, prov = _part(data, "status"), _part(data, "provenance")
    windows = {name: _part(energy, "windows", name) for name in ("run", "timed")}
    headline = windows.get(energy.get("headline_window") or "run") or {}
    by_scope = energy.get("by_scope") or {}
    values = {
        "benchmark": data.get("benchmark"), "work_package": data.get("work_package") or "",
        **{f"system_{k}": system.get(k) for k in ("name", "description")},
        **{k: system.get(k) for k in ("device_kind", "device_unit", "tdp_w", "nodes",
                                      "devices_per_node", "devices")},
        **{k: config.get(k) for k in ("model", "precision", "global_batch", "sequence_length",
                                      "image_size", "backend", "tp", "pp", "dp", "micro_batch", "params",
                                      "compile")},
        "label": config.get("label") or "",
        **{k: tput.get(k) for k in ("unit", "per_s", "per_s_per_device", "per_s_per_node",
                                    "per_s_median", "time_per_iteration_s")},
        "timed_iterations": tput.get("iterations"),
        "timed_s": timed_span(tput.get("iterations"), tput.get("time_per_iteration_s"),
                              windows["timed"].get("seconds")),
        "mfu": mfu.get("value"),
        **{k: mfu.get(k) for k in ("model_tflops_per_device", "hardware_tflops_per_device", "peak_tflops",
                                   "peak_basis", "peak_source")},
        "peak_windows": peak.get("windows"),
        **{f"peak_{k}": peak.get(k) for k in ("min_tflops", "median_tflops", "spread_pct")},
        "energy_scope": energy.get("scope"), "energy_estimated": energy.get("estimated"),
        "energy_incomplete": energy.get("incomplete"), "energy_methods": energy.get("methods"),
        "energy_basis": energy.get("basis"), "energy_devices": energy.get("devices"),
        "energy_window": (energy.get("headline_window") or "run") if energy else None,
        **_windows(headline, windows),
        "energy_missing_pct": windows["run"].get("missing_pct"),
        "energy_covered_pct": windows["run"].get("covered_pct",
                                                 100.0 if windows["run"].get("complete") else None),
        "work_per_wh_gpu": gpu_work_per_wh(energy.get("scope"), windows["run"].get("work_per_wh"),
                                           windows["run"].get("wh"), by_scope.get("gpu")),
        "energy_by_scope": by_scope, "energy_by_node": energy.get("by_node") or {},
        "counter_vs_integrated_pct": energy.get("counter_vs_integrated_pct"),
        "power_limit": limit.get("asked"), "power_limit_asked_w": limit.get("asked_w"),
        "power_limit_scope": limit.get("scope"), "power_limit_before_w": limit.get("before_w"),
        "power_limit_w": limit.get("reported_w", prov.get("power_limit_w")),
        "power_limit_restored": limit.get("restored"),
        **{f"memory_{k}": memory.get(k) for k in ("max_allocated_gib", "max_reserved_gib", "device_gib")},
        "state": status.get("state") or "failed", "reason": status.get("reason") or "",
        "flags": data.get("flags") or (),
        **{k: prov.get(k) for k in ("commit", "clean", "suite_version", "torch", "cuda", "rocm", "date",
                                    "driver", "container", "hipblaslt_allow_tf32")},
        "node_host": prov.get("host"),
    }
    return make(values)


def _windows(headline: dict, windows: dict[str, dict]) -> dict:
    """The headline window's figures and each window's, under the record's names."""
    names = {"wh": "wh", "wh_per_device": "wh_per_device", "work_per_wh": "work_per_wh",
             "power_w_per_device": "mean_power_w_per_device", "window_s": "seconds"}
    out = {ours: headline.get(theirs) for ours, theirs in names.items()}
    for window, figures in windows.items():
        out.update({f"{ours}_{window}": figures.get(theirs) for ours, theirs in names.items()})
        out[f"energy_complete_{window}"] = figures.get("complete")
    return out
