"""Finding JUBE run directories and reading their CSV result tables into one
frame with the same columns for both benchmarks.

JUBE writes `result/result_csv.dat` on `jube result`; where it is missing or
older than the run's work, `jube result -a` brings it up to date first. Columns
are looked up by their title, so columns that other tables add or lack only
leave a figure empty (shown as n/a), never invented."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from caraml.compare import CompareError

RESULT_CSV = Path("result") / "result_csv.dat"
# Files JUBE keeps in every run directory (outpath/<id>)
RUN_MARKERS = ("configuration.xml", "workpackages.xml")


@dataclass(frozen=True)
class Benchmark:
    name: str
    unit: str  # what the throughput counts
    throughput: str  # column titles in the result table
    per_device: str
    per_wh: str
    timed_per_wh: str  # over the timed iterations only, where the table has it
    model: str


BENCHMARKS = {
    "llm": Benchmark("llm", "tokens", "Tokens/s", "Tokens/s/device", "Tokens/Wh", "TimedTokens/Wh",
                     "ModelSize"),
    "image": Benchmark("image", "images", "Images/s", "Images/s/device", "Images/Wh", "TimedImages/Wh",
                       "Model"),
}

# One row of the comparison: configuration first, then the figures
COLUMNS = [
    "system", "platform", "benchmark", "unit", "config", "model", "precision", "variant", "nodes", "devices",
    "global_batch", "params", "throughput", "throughput_per_device", "throughput_per_node", "mfu",
    "energy_wh", "energy_per_device_wh", "energy_per_node_wh", "work_per_wh", "timed_work_per_wh",
    "mean_power_w_per_device", "energy_source", "energy_scope", "flags", "status", "error", "run_dir",
]


@dataclass(frozen=True)
class RunDir:
    path: Path
    system: str | None  # the label given on the command line, None: the table's System column

    @property
    def outpath(self) -> Path:
        return self.path.parent

    @property
    def run_id(self) -> int:
        return int(self.path.name)


def _is_run_dir(path: Path) -> bool:
    return path.name.isdigit() and all((path / m).is_file() for m in RUN_MARKERS)


def _runs_of_outpath(path: Path, all_runs: bool) -> list[Path]:
    runs = sorted((p for p in path.iterdir() if p.is_dir() and _is_run_dir(p)),
                  key=lambda p: int(p.name))
    return runs if all_runs else runs[-1:]


def find_run_dirs(argument: str, all_runs: bool = False) -> list[RunDir]:
    """The run directories behind one command-line argument, `[SYSTEM=]PATH`:
    a run directory, a JUBE outpath (its latest run, or all with all_runs), or
    a directory holding outpaths."""
    system, sep, given = argument.rpartition("=")
    path = Path(given if sep else argument)
    label = system if sep and system else None
    if not path.is_dir():
        raise CompareError(f"{path}: no such directory; give a JUBE run directory or its outpath")
    if _is_run_dir(path):
        return [RunDir(path, label)]
    runs = _runs_of_outpath(path, all_runs)
    if not runs:
        for child in sorted(p for p in path.iterdir() if p.is_dir()):
            runs += _runs_of_outpath(child, all_runs)
    if not runs:
        raise CompareError(f"{path}: not a JUBE run directory (no {' or '.join(RUN_MARKERS)} in it or "
                           "in a numbered folder below it); give the outpath of a `jube run`")
    return [RunDir(p, label) for p in runs]


def _stale(run: RunDir) -> bool:
    csv = run.path / RESULT_CSV
    if not csv.is_file():
        return True
    # a Slurm job that ended after the last `jube result` left newer files
    newest = max((p.stat().st_mtime for p in run.path.glob("*/work/job.out")), default=0.0)
    newest = max(newest, (run.path / "workpackages.xml").stat().st_mtime)
    return csv.stat().st_mtime < newest


def refresh_result(run: RunDir) -> None:
    """Runs `jube result -a` where the CSV table is missing or older than the run."""
    if not _stale(run):
        return
    command = ["jube", "result", "-a", str(run.outpath), "-i", str(run.run_id)]
    try:
        proc = subprocess.run(command, text=True, capture_output=True, timeout=600)
    except FileNotFoundError:
        raise CompareError(f"{run.path}: {RESULT_CSV} is missing and `jube` is not on PATH to make it; "
                           "load JUBE and run again") from None
    if proc.returncode != 0 or not (run.path / RESULT_CSV).is_file():
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise CompareError(f"{run.path}: `{' '.join(command)}` did not write {RESULT_CSV} ({last})")


def _column(table: pd.DataFrame, title: str) -> pd.Series:
    """A column by title; absent columns read as empty."""
    return table[title] if title in table else pd.Series(np.nan, index=table.index)


def _numeric(table: pd.DataFrame, title: str) -> pd.Series:
    return pd.to_numeric(_column(table, title), errors="coerce")


def _scope_column(table: pd.DataFrame) -> pd.Series:
    """EnergyScope, else another column that names a scope (not EnergyByScope's figures)."""
    titles = [c for c in table.columns if c == "EnergyScope"] or \
        [c for c in table.columns if "scope" in c.lower() and "(" not in c]
    return _column(table, titles[0]) if titles else pd.Series("n/a", index=table.index)


def detect_benchmark(table: pd.DataFrame, csv: Path) -> Benchmark:
    for bench in BENCHMARKS.values():
        if bench.throughput in table.columns:
            return bench
    raise CompareError(f"{csv}: neither Tokens/s nor Images/s among its columns; "
                       "not a result table of this suite's benchmarks")


def _text(table: pd.DataFrame, title: str) -> pd.Series:
    return _column(table, title).astype(object).where(_column(table, title).notna(), "n/a").astype(str)


def _variant(table: pd.DataFrame, bench: Benchmark) -> pd.Series:
    """The LLM's backend, the image benchmark's image size."""
    return _text(table, "Backend") if bench.name == "llm" else _text(table, "ImageSize") + "px"


def _config(table: pd.DataFrame, bench: Benchmark) -> pd.Series:
    """What must agree for two rows to be the same configuration, apart from
    nodes, devices and batch."""
    parts = pd.concat([_text(table, bench.model), _text(table, "Precision"), _variant(table, bench)], axis=1)
    return parts.agg(" ".join, axis=1)


def read_run(run: RunDir) -> pd.DataFrame:
    """The run's rows in the comparison's columns (see COLUMNS)."""
    refresh_result(run)
    csv = run.path / RESULT_CSV
    try:
        table = pd.read_csv(csv, keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise CompareError(f"{csv}: not a readable CSV table ({str(err).splitlines()[0]})") from None
    bench = detect_benchmark(table, csv)
    if table.empty:
        raise CompareError(f"{csv}: the table has no rows; run `jube result` on a run that has work packages")
    nodes, devices = _numeric(table, "Nodes"), _numeric(table, "Devices")
    throughput = _numeric(table, bench.throughput)
    per_device = _numeric(table, bench.per_device).fillna(throughput / devices)
    energy = _numeric(table, "Energy(Wh)")
    platform = _text(table, "System")
    out = pd.DataFrame({
        "system": run.system if run.system else platform,
        "platform": platform,
        "benchmark": bench.name,
        "unit": bench.unit,
        "config": _config(table, bench),
        "model": _text(table, bench.model),
        "precision": _text(table, "Precision"),
        "variant": _variant(table, bench),
        "nodes": nodes,
        "devices": devices,
        "global_batch": _numeric(table, "GlobalBatchSize"),
        "params": _numeric(table, "Params"),
        "throughput": throughput,
        "throughput_per_device": per_device,
        "throughput_per_node": throughput / nodes,
        "mfu": _numeric(table, "MFU"),
        "energy_wh": energy,
        "energy_per_device_wh": _numeric(table, "Energy/device(Wh)").fillna(energy / devices),
        "energy_per_node_wh": energy / nodes,
        "work_per_wh": _numeric(table, bench.per_wh),
        "timed_work_per_wh": _numeric(table, bench.timed_per_wh),
        "mean_power_w_per_device": _numeric(table, "MeanPower/device(W)"),
        "energy_source": _column(table, "EnergySource").astype(object).fillna("n/a").astype(str),
        "energy_scope": _scope_column(table).astype(object).fillna("n/a").astype(str),
        "flags": _column(table, "Flags").astype(object).fillna("").astype(str),
        "status": _column(table, "Status").astype(object).fillna("n/a").astype(str),
        "error": _column(table, "Error").astype(object).fillna("").astype(str),
        "run_dir": str(run.path),
    })
    return out[COLUMNS]


def load(arguments: list[str], all_runs: bool = False) -> pd.DataFrame:
    """Every row of every run the arguments name, failed rows included. A run
    whose rows all failed is an error that lists them."""
    frames = []
    for argument in arguments:
        for run in find_run_dirs(argument, all_runs):
            rows = read_run(run)
            if not (rows["status"] == "ok").any():
                reasons = "; ".join(sorted({f"{s}: {e}" if e else s
                                            for s, e in zip(rows["status"], rows["error"])}))
                raise CompareError(f"{run.path / RESULT_CSV}: no row has status ok "
                                   f"({len(rows)} rows: {reasons})")
            frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def check_common_benchmark(rows: pd.DataFrame) -> None:
    """Two or more systems must share at least one benchmark."""
    ok = rows[rows["status"] == "ok"]
    ran = ok.groupby("system", sort=False)["benchmark"].agg(lambda b: sorted(set(b)))
    if len(ran) < 2:
        return
    if ok.groupby("benchmark")["system"].nunique().max() < 2:
        which = "; ".join(f"{system} ran {' and '.join(b)}" for system, b in ran.items())
        raise CompareError(f"{ok['run_dir'].iloc[0]} and the other runs: no common benchmark ({which}); "
                           "give runs of one benchmark from at least two systems")
