"""Combining the files of all ranks and nodes of one job into one table and
one figure (`jpwr combine`). Every rank may measure the same node devices,
so a (host, method, device) seen in several ranks' files is kept once, from
the lowest rank. Which channels add up to the total is decided per host by
jpwr.counting; figures of different scopes are never added, each scope
measured gets its own total. A run that was killed before it wrote its
energy file is integrated from the samples it flushed, and the table says
so. Named windows (windows<suffix>.csv) are combined the same way."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from jpwr.counting import counted
from jpwr.energy import (
    COUNTER,
    COUNTER_COLUMNS,
    ENERGY_COLUMNS,
    POWER_COLUMNS,
    complete_energy_columns,
    energy_table,
)
from jpwr.method import ESTIMATED
from jpwr.notice import one_line, say

FROM_ENERGY = "energy file"
FROM_SAMPLES = "flushed samples (run did not finish)"
# the run ended and its meta file says how many samples it took, so the
# ones its power file lacks are counted as missing
FROM_COUNTED_SAMPLES = "flushed samples (energy file not written)"
PARTIAL = (FROM_SAMPLES, FROM_COUNTED_SAMPLES)
TABLE_COLUMNS = ["host", "rank", *ENERGY_COLUMNS[:3], "counted", *ENERGY_COLUMNS[3:],
                 *COUNTER_COLUMNS, "origin", "file"]
# A counted channel that missed more than this share of its samples makes
# the figure "incomplete" rather than "measured": its energy covers only the
# intervals with answers and can be far too low.
MISSING_LIMIT = 0.05
INCOMPLETE = "incomplete"
# combine()'s table carries the files it could not read under this attribute
UNREADABLE = "unreadable"
# ... and the runs that a later run of the same rank replaced
SUPERSEDED = "superseded"
_RUN_FILE = re.compile(r"(?:meta|power|energy|windows|additional_[a-z]+)(.*)\.(?:json|csv|h5)")
_RANK_IN_SUFFIX = re.compile(r"rank(\d+)")


class NoEnergyData(ValueError):
    pass


class Unreadable(ValueError):
    """A file of a run that cannot be read; the message names it and why."""


@dataclass(frozen=True)
class Run:
    directory: Path
    suffix: str

    def path(self, stem: str, ext: str) -> Path:
        return self.directory / f"{stem}{self.suffix}.{ext}"

    def meta(self, problems: list[str] | None = None) -> dict:
        """The run's metadata; {} where there is none. A file that is there
        and unreadable is added to `problems`: host and rank then come from
        the energy file or the suffix."""
        path = self.path("meta", "json")
        if not path.exists():
            return {}
        try:
            meta = json.loads(path.read_text())
            if not isinstance(meta, dict):
                raise ValueError(f"a JSON {type(meta).__name__}, not an object")
            return meta
        except (OSError, ValueError) as err:
            if problems is not None:
                problems.append(f"{path}: not a readable jpwr meta file ({one_line(err)})")
            return {}


def find_runs(paths: Iterable[str | Path]) -> list[Run]:
    """The runs behind directories (every meta*.json below them) and files
    (the run each file belongs to)."""
    runs: dict[Run, None] = {}
    for given in map(Path, paths):
        if given.is_dir():
            candidates = sorted(given.rglob("meta*.json"))
        elif given.is_file():
            candidates = [given]
        else:
            raise NoEnergyData(f"no such file or directory: {given}")
        for path in candidates:
            match = _RUN_FILE.fullmatch(path.name)
            if match:
                runs[Run(path.parent, match.group(1))] = None
    return list(runs)


def read_power_csv(path: Path) -> pd.DataFrame:
    """A power file as flushed so far; a line cut off by a kill is dropped,
    a file cut off before its first line (a full disk) holds no samples.
    Raises Unreadable, naming the file, for anything else."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise Unreadable(f"{path}: cannot be read ({one_line(err)})") from None
    text = text[:text.rfind("\n") + 1]
    if not text:
        return pd.DataFrame(columns=POWER_COLUMNS)
    try:
        samples = pd.read_csv(io.StringIO(text), dtype={"method": str, "device": str, "source": str})
        samples = samples[POWER_COLUMNS]
        samples["time"] = pd.to_numeric(samples["time"])
        samples["power_w"] = pd.to_numeric(samples["power_w"])
    except (ValueError, KeyError) as err:  # pandas' parser errors are ValueErrors
        raise Unreadable(f"{path}: not a jpwr power file ({one_line(err)})") from None
    return samples


def _read_energy(path: Path) -> pd.DataFrame:
    if path.suffix == ".h5":
        table = pd.read_hdf(path, key="energy")
    else:
        table = pd.read_csv(path, dtype={"host": str, "method": str, "device": str, "source": str})
    missing = set(ENERGY_COLUMNS) - set(table.columns)
    if missing:
        raise ValueError(f"{path} is not a jpwr energy file (no {', '.join(sorted(missing))})")
    return complete_energy_columns(table)


def read_run(run: Run, problems: list[str] | None = None) -> pd.DataFrame | None:
    """The run's table: from its energy file, or else from the samples it
    flushed. What cannot be read is named in `problems` and passed over."""
    problems = [] if problems is None else problems
    energy_path = next((p for p in (run.path("energy", "csv"), run.path("energy", "h5"))
                        if p.is_file()), None)
    power_path = run.path("power", "csv")
    if energy_path is None and not power_path.is_file():
        return None  # e.g. someone else's metadata.json
    meta = run.meta(problems)
    table = None
    if energy_path is not None:
        try:
            table, origin, path = _read_energy(energy_path), FROM_ENERGY, energy_path
        except Exception as err:  # noqa: BLE001 - pandas and h5 errors alike
            problems.append(f"{energy_path}: not a readable jpwr energy file ({one_line(err)})")
    if table is None:
        if not power_path.is_file():
            return None
        try:
            samples = read_power_csv(power_path)
        except Unreadable as err:
            problems.append(str(err))
            return None
        if samples.empty:
            problems.append(f"{power_path}: no samples (the run wrote none, or its disk was full)")
            return None
        table, origin, path = energy_table(samples), FROM_SAMPLES, power_path
        table.insert(0, "host", meta.get("host", "unknown"))
        table.insert(1, "rank", meta.get("rank"))
        taken = meta.get("samples") if meta.get("complete") else None
        if isinstance(taken, int):
            flushed = table["samples"] + table["missing"]
            table["missing"] += (taken - flushed).clip(lower=0)
            origin = FROM_COUNTED_SAMPLES
    if "rank" not in table or table["rank"].isna().all():
        found = _RANK_IN_SUFFIX.search(run.suffix)
        table["rank"] = int(found.group(1)) if found else meta.get("rank")
    table["origin"] = origin
    table["file"] = str(path)
    return table


def _iso_time(text: object) -> float | None:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return None


def latest_runs(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """The runs to combine, and a note for each one left out. A run of a
    rank (of a host where its files name no rank) is left out where a later
    run of the same rank started after it ended, or after it started where
    it never recorded its end: a requeued job's earlier attempt, or an
    earlier command line run into the same --df-out (the files of runs
    never collide: host and pid are in their names). Adding them up would
    count a device once per run. Runs that overlap in time are different
    processes and all count, as do runs whose meta file gives no start."""
    by_key: dict[tuple, list[tuple[float, float | None, Run]]] = {}
    kept = []
    for run in runs:
        meta = run.meta()
        rank, in_suffix = meta.get("rank"), _RANK_IN_SUFFIX.search(run.suffix)
        if not isinstance(rank, int) and in_suffix:
            rank = int(in_suffix.group(1))
        started = _iso_time(meta.get("start_time"))
        key = ("rank", rank) if isinstance(rank, int) else ("host", meta.get("host"))
        if started is None or key == ("host", None):
            kept.append(run)
            continue
        by_key.setdefault(key, []).append((started, _iso_time(meta.get("end_time")), run))
    notes_ = []
    for (kind, which), found in by_key.items():
        found.sort(key=lambda entry: entry[0])
        for i, (started, ended, run) in enumerate(found):
            later = next((r for s, _, r in found[i + 1:] if s >= (ended or started)), None)
            if later is None:
                kept.append(run)
            else:
                notes_.append(f"{run.path('meta', 'json')}: an earlier run of {kind} {which} than "
                              f"{later.path('meta', 'json')}; only the later one counts (combine "
                              f"the earlier one by naming its files)")
    return [run for run in runs if run in kept], notes_  # in the order found


def _once_per_device(table: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """Each device once, from the lowest rank that reported it."""
    table["rank"] = pd.array(pd.to_numeric(table["rank"], errors="coerce"), dtype="Int64")
    table["host"] = table["host"].astype(str)
    table["device"] = table["device"].astype(str)
    by_rank = table["rank"].astype("Float64").fillna(np.inf).to_numpy(float)
    table = table.iloc[np.argsort(by_rank, kind="stable")]
    table = table.drop_duplicates(key, keep="first")
    return table.sort_values("host", kind="stable").reset_index(drop=True)


def combine(paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per (host, method, device) over all runs found under paths,
    with `counted` telling which rows make up the total."""
    paths = list(paths)
    problems: list[str] = []
    runs, superseded = latest_runs(find_runs(paths))
    tables = [t for t in (read_run(run, problems) for run in runs) if t is not None]
    if not tables:
        raise NoEnergyData(f"no jpwr energy or power data found in {', '.join(map(str, paths))}"
                           + "".join(f"; {p}" for p in problems))
    table = _once_per_device(pd.concat(tables, ignore_index=True), ["host", "method", "device"])
    table["counted"] = counted(table)
    table = table[TABLE_COLUMNS].copy()
    table.attrs[UNREADABLE] = problems
    table.attrs[SUPERSEDED] = superseded
    return table


def combine_windows(paths: Iterable[str | Path]) -> pd.DataFrame:
    """The named windows of all runs under paths, one row per window and
    (host, method, device); empty where no run marked a window."""
    tables = []
    for run in latest_runs(find_runs(list(paths)))[0]:  # combine() names the runs left out
        path = run.path("windows", "csv")
        if path.is_file():
            try:
                table = pd.read_csv(path, dtype={"host": str, "method": str, "device": str,
                                                 "source": str, "window": str})
            except (OSError, ValueError) as err:  # the whole run then has no window figure
                say(f"warning: {path}: not a readable jpwr windows file ({one_line(err)})")
                continue
            tables.append(table)
    if not tables:
        return pd.DataFrame()
    table = _once_per_device(pd.concat(tables, ignore_index=True),
                             ["window", "host", "method", "device"])
    table["counted"] = counted(table)
    return table


def _joined(values: Iterable[str]) -> str:
    # "+", not ",": tables that split values at commas read it as one value.
    return "+".join(dict.fromkeys(values))


def summarize(table: pd.DataFrame) -> dict:
    """The job's figure from combine()'s table."""
    counting = table[table["counted"]]
    known = counting[counting["energy_wh"].notna()]
    if known.empty:
        raise NoEnergyData("no channel that counts into the total has any energy data")
    total = float(known["energy_wh"].sum())
    # A channel that never answered is left out of the total and noted (on
    # MI250 amdsmi reports the card on its first GCD and nothing on the
    # second); the share missing is over the channels with data.
    taken = known["samples"] + known["missing"]
    missing_share = float(known["missing"].sum() / taken.sum()) if taken.sum() else 0.0
    by_counter = known[known["basis"] == COUNTER]
    counter_total = float(by_counter["counter_wh"].sum())
    # A run that never wrote its energy file covers only what it flushed:
    # how many samples are missing is known only where its meta file
    # counted them, and unknown for a run that stopped without doing so.
    origins = known["origin"] if "origin" in known else pd.Series(dtype=str)
    uncounted = int(known.loc[origins == FROM_SAMPLES, "file"].nunique())
    unreadable = len(table.attrs.get(UNREADABLE, []))
    unknown = bool(uncounted or unreadable)
    # Whatever the source, measured or estimated, the figure is whole only
    # where every counted channel spans the whole run: by its counter, or by
    # samples answered and kept throughout. Otherwise it covers the share of
    # samples it holds (unknown where what is missing was not counted).
    gaps = (known["missing"] > 0) & (known["basis"] != COUNTER)
    complete = not (unknown or gaps.any())
    # the source's `incomplete`: gaps beyond the limit, or in the samples
    # of a run that could not write its energy file
    beyond = gaps & ((known["missing"] > MISSING_LIMIT * taken) | origins.isin(PARTIAL))
    if (counting["source"] == ESTIMATED).any():
        source = ESTIMATED
    elif unknown or beyond.any():
        source = INCOMPLETE
    else:
        source = "measured"
    return {
        "total_wh": total,
        "devices": len(known),
        "wh_per_device": total / len(known),
        "mean_w_per_device": float(known["mean_w"].mean()),
        "max_w": float(known["max_w"].max()),
        "duration_s": float(known["t_end"].max() - known["t_start"].min()),
        "methods": _joined(known["method"]),
        "source": source,
        "scope": _joined(known["scope"]),
        "basis": _joined(known["basis"]),
        # the integral's deviation from the counter, over the channels with one
        "counter_vs_integrated_pct": (100 * (float(by_counter["integrated_wh"].sum())
                                             - counter_total) / counter_total
                                      if counter_total else np.nan),
        # unknown (nan) where a run stopped without counting its samples or a file is lost
        "missing_pct": np.nan if unknown else 100 * missing_share,
        "complete": "yes" if complete else "no",
        "covered_pct": 100.0 if complete else np.nan if unknown else 100 * (1 - missing_share),
    }


def scope_lines(table: pd.DataFrame) -> list[str]:
    """One `jpwr-scope:` line per scope measured, each scope's own total
    over every host where it was measured, counted into the headline or not,
    and one `jpwr-scopes:` line with all of them in Wh."""
    lines, totals = [], []
    for scope, rows in table[table["energy_wh"].notna()].groupby("scope", sort=False):
        total = float(rows["energy_wh"].sum())
        totals.append(f"{scope}={_number(total)}")
        lines.append(f"jpwr-scope: scope={scope} total_wh={_number(total)} devices={len(rows)} "
                     f"wh_per_device={_number(total / len(rows))} basis={_joined(rows['basis'])}")
    return [*lines, "jpwr-scopes: " + " ".join(totals)] if totals else []


def host_lines(table: pd.DataFrame) -> list[str]:
    """One `jpwr-hosts:` line: each host's (node's) part of the headline
    total in Wh, from the channels counted into it."""
    counting = table[table["counted"] & table["energy_wh"].notna()]
    totals = counting.groupby("host", sort=True)["energy_wh"].sum()
    return (["jpwr-hosts: " + " ".join(f"{host}={_number(float(wh))}" for host, wh in totals.items())]
            if len(totals) else [])


def window_lines(windows: pd.DataFrame) -> list[str]:
    """One `jpwr-window:` line per named window and scope; counted=yes marks
    the scope that makes up the headline total (scopes are never added)."""
    if windows.empty:
        return []
    lines = []
    for (name, scope), rows in windows.groupby(["window", "scope"], sort=False):
        # a device whose samples have a gap in the window leaves the
        # window's total unknown, not smaller
        gap = rows["energy_wh"].isna().any()
        total = np.nan if gap else float(rows["energy_wh"].sum())
        counted_here = "yes" if rows["counted"].all() else "no"
        lines.append(f"jpwr-window: window={name} scope={scope} counted={counted_here} "
                     f"total_wh={_number(total)} devices={len(rows)} "
                     f"wh_per_device={_number(total / len(rows))} "
                     f"duration_s={_number(float(rows['duration_s'].max()))} "
                     f"basis={INCOMPLETE if gap else _joined(rows['basis'])}")
    return lines


def _number(value: float) -> str:
    if not np.isfinite(value):
        return "nan"
    text = f"{value:.6g}"
    return text if any(c in text for c in ".en") else text + ".0"


def summary_line(summary: dict) -> str:
    """The one line a result table reads."""
    return ("jpwr-summary: " + " ".join(
        f"{key}={_number(value) if isinstance(value, float) else value}"
        for key, value in summary.items()))


def result_lines(table: pd.DataFrame, paths: Iterable[str | Path]) -> list[str]:
    """The lines `jpwr combine` ends with, which a result table reads: the
    summary, each host's part, each scope's total and each named window."""
    return ([summary_line(summarize(table))] + host_lines(table) + scope_lines(table)
            + window_lines(combine_windows(paths)))


def notes(table: pd.DataFrame) -> list[str]:
    """What a reader of the figure must know: unfinished runs, gaps, and
    counted channels without data."""
    lines = [f"{problem}; it is left out, the figure is marked {INCOMPLETE} (complete=no)"
             for problem in table.attrs.get(UNREADABLE, [])] + list(table.attrs.get(SUPERSEDED, []))
    for path, rows in table[table["origin"].isin(PARTIAL)].groupby("file", sort=False):
        whole = (rows["origin"] == FROM_COUNTED_SAMPLES).all() and not rows["missing"].any()
        lines.append(f"{path}: the run did not finish or could not write its energy file; its "
                     f"figure comes from the samples it flushed, {rows['duration_s'].max():.1f} s "
                     f"of them, " + ("every sample it took: whole, integrated from them" if whole
                                     else f"and is marked {INCOMPLETE} (complete=no)"))
    for row in table[table["counted"]].itertuples():
        where = f"{row.host} {row.method} {row.device}"
        if np.isnan(row.energy_wh):
            lines.append(f"{where}: no usable samples; it is left out of the total")
        elif row.missing:
            marked = (f"; more than {MISSING_LIMIT:.0%} missing: the figure is marked {INCOMPLETE}"
                      if row.missing > MISSING_LIMIT * (row.samples + row.missing) else "")
            lines.append(f"{where}: {row.missing} samples missing (unanswered or not written); "
                         f"its energy covers only the answered intervals{marked}")
    scopes = table[table["counted"] & table["energy_wh"].notna()]["scope"].unique()
    if len(scopes) > 1:
        lines.append(f"the hosts count different scopes ({' and '.join(scopes)}); the total "
                     f"adds them, compare per scope (jpwr-scope lines)")
    return lines


def format_table(table: pd.DataFrame) -> str:
    shown = table[["host", "rank", "method", "device", "source", "scope", "counted", "energy_wh",
                   "basis", "counter_vs_integrated_pct", "mean_w", "max_w", "duration_s",
                   "samples", "missing"]].rename(
        columns={"counter_vs_integrated_pct": "integral_vs_counter_pct"}).copy()
    shown["counted"] = shown["counted"].map({True: "yes", False: "no"})
    shown["rank"] = shown["rank"].astype(object).where(shown["rank"].notna(), "-")
    return shown.to_string(index=False, na_rep="-", float_format=lambda x: f"{x:.6g}")
