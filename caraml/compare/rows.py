"""Finding JUBE run directories and reading the row.json files the row model
wrote into them (`<run_dir>/*/work/row.json`, schema caraml-row/1, see
docs/architecture.md) into one frame, one line per measured configuration.

Nothing is derived here that the row already holds: throughput per device
and per node, MFU with its peak and basis, energy with its scope and window
come from the row as written. A run without row.json, or with one that
cannot be read, becomes a failed line that says why, so the system stays in
the comparison."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from caraml import benchmarks, jube_run
from caraml.row import run as row_model
from caraml.power_limit import DEFAULT as DEFAULT_LIMIT
from caraml.compare import CompareError
from caraml.login import systems
from caraml.row.status import MEASURED

# A row is a measurement only with at least this many timed iterations
# lasting at least this long (docs/compare.md says why these two); a shorter
# row is a smoke run: shown, marked, never ranked, divided or extrapolated.
MIN_TIMED_ITERATIONS = 20
MIN_TIMED_SECONDS = 60.0
SMOKE = "smoke, not a measurement"


@dataclass(frozen=True)
class RunDir:
    path: Path
    system: str | None  # the label given on the command line; None: the row's system name


# a system's name on the command line (A100, MI250X, GH200-module, ...)
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def _is_run_dir(path: Path) -> bool:
    return path.name.isdigit() and jube_run.is_run(path)


def _runs_of_outpath(path: Path, all_runs: bool) -> list[Path]:
    runs = sorted((p for p in path.iterdir() if p.is_dir() and _is_run_dir(p)), key=lambda p: int(p.name))
    return runs if all_runs else runs[-1:]


def _labelled(argument: str) -> tuple[Path, str | None]:
    """`SYSTEM=PATH` or `PATH`. A label is a word before the first `=`
    (no `/`), so a path may hold `=` itself (runs/bs=512); an argument that
    is a folder as it stands is a path."""
    label, sep, given = argument.partition("=")
    if not sep or Path(argument).is_dir() or not _LABEL.fullmatch(label):
        return Path(argument), None
    return Path(given), label


def find_run_dirs(argument: str, all_runs: bool = False) -> list[RunDir]:
    """The run directories behind one command-line argument, `[SYSTEM=]PATH`:
    a run directory, a JUBE outpath (its latest run, or all with all_runs), or
    a directory holding outpaths."""
    path, label = _labelled(argument)
    if not path.is_dir():
        raise CompareError(f"{path}: no such directory; give a JUBE run directory or its outpath")
    if _is_run_dir(path):
        return [RunDir(path, label)]
    runs = _runs_of_outpath(path, all_runs)
    if not runs:
        for child in sorted(p for p in path.iterdir() if p.is_dir()):
            runs += _runs_of_outpath(child, all_runs)
    if not runs:
        raise CompareError(f"{path}: not a JUBE run directory (no {jube_run.RECORD} in it or "
                           "in a numbered folder below it); give the outpath of a `jube run`")
    return [RunDir(p, label) for p in runs]


def _num(value) -> float:
    """JSON numbers as floats; null, strings and booleans as NaN (the contract has numbers only)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def _text(value, default: str = "n/a") -> str:
    return default if value is None or value == "" else str(value)


def _size(benchmark: str, config: dict) -> tuple[float, str]:
    """The size two rows must share to be like for like: the LLM's sequence
    length, the image benchmark's image size. An operator row's problem,
    in its model's name, fixes its grid: it has no size, and its label
    says how the model ran (eager, or the torch.compile mode)."""
    entry = benchmarks.find(benchmark)
    if entry is None:
        return math.nan, "size n/a"
    if entry.size is None:
        mode = config.get("compile")
        return math.nan, "eager" if mode in (None, "", "none") else f"compile {mode}"
    key, label, missing = entry.size
    size = _num(config.get(key))
    return size, label.format(size) if size == size else missing


def smoke(line: dict | pd.Series) -> str:
    """Why a row that ran is too short to be a measurement; empty where it is one."""
    if line["status"] not in MEASURED:
        return ""
    iterations, seconds = line["iterations"], line["timed_seconds"]
    if pd.isna(iterations) or pd.isna(seconds):
        return f"{SMOKE}: its timed iterations or their time are not recorded"
    if iterations < MIN_TIMED_ITERATIONS or seconds < MIN_TIMED_SECONDS:
        return (f"{SMOKE}: {iterations:g} timed iterations in {seconds:.3g} s, a measurement needs "
                f"{MIN_TIMED_ITERATIONS} and {MIN_TIMED_SECONDS:g} s")
    return ""


def _gpu_work_per_wh(energy: dict, run_window: dict) -> float:
    """Work per Wh of the accelerators alone over the whole run: the scope
    every GPU system has, also where the headline counts more (a GH200
    module): the run's work over the gpu scope's Wh of jpwr's by-scope line
    (which covers the whole run). NaN where the row has no GPU channel."""
    work_per_wh, wh = _num(run_window.get("work_per_wh")), _num(run_window.get("wh"))
    if energy.get("scope") == "gpu":
        return work_per_wh
    gpu_wh = _num((energy.get("by_scope") or {}).get("gpu"))
    return work_per_wh * wh / gpu_wh if gpu_wh > 0 else math.nan


def _limit(row: dict) -> dict:
    """The power limit the job ran at, per device (row key power_limit:
    null where the job left the devices' limit alone). A sweep's `default`
    point asks for no watts: it measures the limit the devices had."""
    limit = row.get("power_limit")
    if not isinstance(limit, dict):
        return {"limit_swept": False, "limit_default": True, "limit_asked": "", "limit_asked_w": math.nan,
                "limit_before_w": math.nan, "limit_w": math.nan, "limit_restored": None, "limit_scope": ""}
    restored, asked = limit.get("restored"), _text(limit.get("asked"))
    asked_w = _num(limit.get("asked_w"))
    # a point that asked for watts and got none worked out (a fraction without a TDP) is no default point
    default = asked == DEFAULT_LIMIT if asked != "n/a" else math.isnan(asked_w)
    return {"limit_swept": True, "limit_default": default,
            "limit_asked": asked, "limit_asked_w": asked_w,
            "limit_before_w": _num(limit.get("before_w")),
            "limit_w": _num(limit.get("reported_w")),
            "limit_restored": restored if isinstance(restored, bool) else None,
            # what the limit limits: the GPU or its GH200 module ("" in rows from before scopes)
            "limit_scope": _text(limit.get("scope"), "")}


def flatten(row: dict, run: RunDir, path: Path) -> dict:
    """One row.json as one line of the comparison."""
    system, config = row.get("system") or {}, row.get("config") or {}
    tput, mfu = row.get("throughput") or {}, row.get("mfu") or {}
    energy, status, prov = row.get("energy") or {}, row.get("status") or {}, row.get("provenance") or {}
    benchmark = _text(row.get("benchmark"))
    window = energy.get("headline_window") or "run"
    figures = (energy.get("windows") or {}).get(window) or {}
    timed = (energy.get("windows") or {}).get("timed") or {}
    run_window = (energy.get("windows") or {}).get("run") or {}
    size, size_label = _size(benchmark, config)
    model, precision = _text(config.get("model")), _text(config.get("precision"))
    platform = _text(system.get("name"))
    backend = _text(config.get("backend"))
    iterations = _num(tput.get("iterations"))
    # the timed iterations' span: their count times their mean time, else the timed energy window
    seconds = iterations * _num(tput.get("time_per_iteration_s"))
    seconds = _num(timed.get("seconds")) if math.isnan(seconds) else seconds
    line = {
        "system": run.system or platform, "platform": platform, "benchmark": benchmark,
        "unit": tput.get("unit") or getattr(benchmarks.find(benchmark), "unit", "work"),
        "model": model, "precision": precision, "size": size, "size_label": size_label,
        # torch.compile's mode: eager and compiled rows are not like for like
        "compile": _text(config.get("compile")),
        "like": f"{model} {precision} {size_label}",
        "variant": backend if getattr(benchmarks.find(benchmark), "variant_by_backend", False)
        else size_label,
        "backend": backend, "label": _text(config.get("label"), ""),
        "description": _text(system.get("description")), "device_kind": _text(system.get("device_kind")),
        "device_unit": _text(system.get("device_unit"), "device"), "tdp_w": _num(system.get("tdp_w")),
        "nodes": _num(system.get("nodes")), "devices_per_node": _num(system.get("devices_per_node")),
        "devices": _num(system.get("devices")),
        "global_batch": _num(config.get("global_batch")), "micro_batch": _num(config.get("micro_batch")),
        "tp": _num(config.get("tp")), "pp": _num(config.get("pp")), "dp": _num(config.get("dp")),
        "params": _num(config.get("params")),
        "throughput": _num(tput.get("per_s")),
        "throughput_median": _num(tput.get("per_s_median")),
        "throughput_per_device": _num(tput.get("per_s_per_device")),
        "throughput_per_node": _num(tput.get("per_s_per_node")), "iterations": iterations,
        "timed_seconds": seconds,
        "mfu": _num(mfu.get("value")), "peak_tflops": _num(mfu.get("peak_tflops")),
        "peak_basis": _text(mfu.get("peak_basis")), "peak_source": _text(mfu.get("peak_source"), ""),
        "model_tflops_per_device": _num(mfu.get("model_tflops_per_device")),
        "energy_scope": _text(energy.get("scope")) if energy else "n/a",
        "energy_estimated": bool(energy.get("estimated")) if energy else False,
        "energy_methods": _text(energy.get("methods")) if energy else "n/a",
        "energy_basis": _text(energy.get("basis")) if energy else "n/a",
        "energy_devices": _num(energy.get("devices")),
        "energy_window": window if energy else "n/a",
        "energy_wh": _num(figures.get("wh")), "energy_per_device_wh": _num(figures.get("wh_per_device")),
        "work_per_wh": _num(figures.get("work_per_wh")),
        "timed_work_per_wh": _num(timed.get("work_per_wh")),
        "gpu_work_per_wh": _gpu_work_per_wh(energy, run_window),
        "mean_power_w_per_device": _num(figures.get("mean_power_w_per_device")),
        **_limit(row),
        "energy_seconds": _num(figures.get("seconds")),
        "energy_by_scope": " ".join(f"{k}:{v:.4g}Wh" for k, v in (energy.get("by_scope") or {}).items()
                                    if isinstance(v, (int, float))),
        "flags": " ".join(map(str, row.get("flags") or [])),
        "status": _text(status.get("state")), "reason": _text(status.get("reason"), ""),
        "commit": _text(prov.get("commit")), "clean": prov.get("clean"),
        "suite_version": _text(prov.get("suite_version")), "torch": _text(prov.get("torch")),
        "cuda": _text(prov.get("cuda")), "rocm": _text(prov.get("rocm")),
        "driver": _text(prov.get("driver"), "not recorded"),
        "container": _text(prov.get("container"), "not recorded"),
        "date": _text(prov.get("date")), "host": _text(prov.get("host")),
        "work_package": _text(row.get("work_package"), str(path.parent.parent)),
        "row_file": str(path), "run_dir": str(run.path),
    }
    return {**line, "smoke": smoke(line)}


COLUMNS = list(flatten({}, RunDir(Path("."), None), Path("x/work/row.json")))


def _failed(run: RunDir, path: Path, reason: str) -> dict:
    """A line for a run or file that gave no row: the system stays in the report with the reason."""
    line = flatten({}, run, path)
    line.update(system=run.system or f"{run.path.parent.name}/{run.path.name}", status="failed",
                reason=reason, benchmark="n/a", smoke="")
    return line


def read_run(run: RunDir) -> list[dict]:
    """The run's lines, as the row model decides them: one per configuration
    (its row.json, or the model's decision where the last step has not run),
    a failed line where the run holds none."""
    rows = row_model.rows_of_run(run.path)
    if not rows:
        return [_failed(run, run.path, f"{run.path} holds no work package: the run stopped before "
                        f"its first job (jube status {run.path.parent})")]
    return [flatten(row, run, Path(row.get("work_package") or run.path) / row_model.FILE_NAME)
            for row in rows]


def load(arguments: list[str], all_runs: bool = False) -> pd.DataFrame:
    """Every line of every run the arguments name, failed ones included."""
    lines = [line for argument in arguments for run in find_run_dirs(argument, all_runs)
             for line in read_run(run)]
    rows = pd.DataFrame(lines, columns=COLUMNS)
    # a failed line without a benchmark belongs to each benchmark its system ran
    known = rows[rows["benchmark"] != "n/a"].groupby("system")["benchmark"].first()
    rows.loc[rows["benchmark"] == "n/a", "benchmark"] = rows["system"].map(known).fillna("n/a")
    return with_packages(rows)


def with_packages(rows: pd.DataFrame) -> pd.DataFrame:
    """Adds the accelerator package of each row's system as platform.xml
    declares it (package_unit, devices_per_package) and the throughput per
    package; NaN for a system platform.xml does not know."""
    packages = {tag: system.package for tag, system in systems.load().items() if system.package}
    known = rows["platform"].map(packages)
    rows = rows.assign(package_unit=known.map(lambda p: p[0] if isinstance(p, tuple) else "n/a"),
                       devices_per_package=known.map(lambda p: p[1] if isinstance(p, tuple) else math.nan))
    return rows.assign(throughput_per_package=rows["throughput_per_device"] * rows["devices_per_package"])


def at_default_limit(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows that rank each system (run at the devices' own limit: no
    sweep, or a sweep's `default` point) and the sweep's capped points,
    which are never ranked beside them as if they were another system."""
    return rows[rows["limit_default"]], rows[~rows["limit_default"]]


def ran(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows whose job ran to a figure, smoke runs included."""
    return rows[rows["status"].isin(MEASURED)]


def measured(rows: pd.DataFrame) -> pd.DataFrame:
    """The measurements: rows that ran, long enough (no smoke run)."""
    return rows[rows["status"].isin(MEASURED) & (rows["smoke"] == "")]


def check_comparable(rows: pd.DataFrame) -> None:
    """Something must have run (a smoke run is shown, marked); and two or
    more systems that ran something must share a benchmark."""
    ok = ran(rows)
    if ok.empty:
        reasons = "; ".join(dict.fromkeys(f"{s}: {r}" for s, r in zip(rows["system"], rows["reason"])))
        raise CompareError(f"nothing to compare: no row of the {rows['system'].nunique()} system(s) ran "
                           f"({reasons[:300]})")
    by_system = ok.groupby("system", sort=False)["benchmark"].agg(lambda b: sorted(set(b)))
    if len(by_system) >= 2 and ok.groupby("benchmark")["system"].nunique().max() < 2:
        which = "; ".join(f"{system} ran {' and '.join(b)}" for system, b in by_system.items())
        raise CompareError(f"{ok['run_dir'].iloc[0]} and the other runs: no common benchmark ({which}); "
                           "give runs of one benchmark from at least two systems")
