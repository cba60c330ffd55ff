"""Combining the files of all ranks and nodes of one job into one table and
one figure (`jpwr combine`). Every rank may measure the same node devices,
so a (host, method, device) seen in several ranks' files is kept once, from
the lowest rank. Which channels add up to the total is decided per host by
jpwr.counting; figures of different scopes are never added, each scope
measured gets its own total. A run that was killed before it wrote its
energy file is integrated from the samples it flushed, and the table says
so. Named windows (windows<suffix>.csv) are combined the same way.

A job of tens of thousands of ranks leaves tens of thousands of files:
each folder is listed once, each file read once (by a few threads, where
a parallel file system's latency would otherwise add up), and the energy
and window files of all ranks are parsed together, one parse per file
layout, so the time grows with the files and nothing else."""

from __future__ import annotations

import bisect
import io
import json
import os
import re
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
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


def _meta(path: Path, text: str | Exception, problems: list[str] | None) -> dict:
    """A run's metadata from its meta file's text (or the error reading it
    raised); {} where it cannot be read, which `problems` then names: host
    and rank then come from the energy file or the suffix."""
    try:
        if isinstance(text, Exception):
            raise text
        meta = json.loads(text)
        if not isinstance(meta, dict):
            raise ValueError(f"a JSON {type(meta).__name__}, not an object")
        return meta
    except (OSError, ValueError) as err:  # a UnicodeDecodeError is a ValueError
        if problems is not None:
            problems.append(f"{path}: not a readable jpwr meta file ({one_line(err)})")
        return {}


# Where a file takes longer than this to read (a parallel file system
# answers every open after a round trip), the rest of a long list is read
# by threads, which overlap the waits; on a local disk, which answers at
# once, threads would only add their own cost. The first files tell.
SLOW_FILE_S = 1e-4
_PROBE = 64
READERS = 8
_CHUNK = 128  # files a thread reads at a time: handing out work costs little more


def _read_text(path: Path) -> str | Exception:
    try:
        with open(path, "rb") as f:
            return f.read().decode()
    except (OSError, UnicodeDecodeError) as err:
        return err


def read_texts(paths: Sequence[Path]) -> list[str | Exception]:
    """Each file's text, or the error that reading it raised, in the order given."""
    begun = time.perf_counter()
    texts = [_read_text(path) for path in paths[:_PROBE]]
    rest = paths[_PROBE:]
    if len(rest) < _PROBE or time.perf_counter() - begun < SLOW_FILE_S * len(texts):
        return texts + [_read_text(path) for path in rest]
    chunks = [rest[i:i + _CHUNK] for i in range(0, len(rest), _CHUNK)]
    with ThreadPoolExecutor(READERS) as pool:
        return texts + [text for chunk in pool.map(lambda c: [_read_text(p) for p in c], chunks)
                        for text in chunk]


@dataclass
class _Found:
    """The runs behind the paths given, in the order found, and the file
    names of every folder listed: what a run has is looked up, not asked
    of the file system file by file."""

    runs: list[Run]
    names: dict[Path, set[str]]

    def has(self, run: Run, stem: str, ext: str) -> bool:
        listed = self.names.get(run.directory)
        if listed is None:  # a folder that could not be listed
            return run.path(stem, ext).is_file()
        return f"{stem}{run.suffix}.{ext}" in listed


def _find(paths: Iterable[str | Path]) -> _Found:
    """The runs behind directories (every meta*.json below them) and files
    (the run each file belongs to), each folder listed once"""
    runs: dict[Run, None] = {}
    names: dict[Path, set[str]] = {}
    for given in map(Path, paths):
        if given.is_dir():
            metas: list[tuple[Path, str]] = []
            for folder, _, files in os.walk(given):
                here = Path(folder)
                names[here] = set(files)
                metas.extend((here, name) for name in files
                             if name.startswith("meta") and name.endswith(".json"))
            # in the order of the paths (folders by their parts), as a sorted glob gives them
            candidates = [here / name for here, name in sorted(metas, key=lambda m: (m[0].parts, m[1]))]
        elif given.is_file():
            candidates = [given]
            if given.parent not in names:
                try:
                    names[given.parent] = set(os.listdir(given.parent))
                except OSError:
                    pass
        else:
            raise NoEnergyData(f"no such file or directory: {given}")
        for path in candidates:
            match = _RUN_FILE.fullmatch(path.name)
            if match:
                runs[Run(path.parent, match.group(1))] = None
    return _Found(list(runs), names)


def find_runs(paths: Iterable[str | Path]) -> list[Run]:
    """The runs behind directories and files (see _find)."""
    return _find(paths).runs


def read_power_csv(path: Path) -> pd.DataFrame:
    """A power file as flushed so far; a line cut off by a kill is dropped,
    a file cut off before its first line (a full disk) holds no samples.
    Raises Unreadable, naming the file, for anything else."""
    text = _read_text(path)
    if isinstance(text, Exception):
        raise Unreadable(f"{path}: cannot be read ({one_line(text)})")
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


_ENERGY_TYPES = {"host": str, "method": str, "device": str, "source": str}
_WINDOW_TYPES = {**_ENERGY_TYPES, "window": str}
_RUN_INDEX = "_run"  # a row's run while the job's tables are put together


def _tables(paths: dict[int, Path], dtype: dict) -> tuple[list[tuple[list[int], pd.DataFrame]],
                                                          dict[int, Exception]]:
    """The CSV files (by run index) read and parsed: files with the same
    header line together, in one parse, each row marked with its run's
    index; a file that does not parse so (or is not plain: quotes, blank
    lines) on its own. Each table comes with the runs it holds; what cannot
    be read or parsed comes back as errors."""
    texts: dict[int, str] = {}
    errors: dict[int, Exception] = {}
    for i, text in zip(paths, read_texts(list(paths.values()))):
        if isinstance(text, Exception):
            errors[i] = text
        else:
            texts[i] = text
    layouts: dict[str, list[int]] = {}
    alone = []
    for i, text in texts.items():
        header, newline, _ = text.partition("\n")
        if newline and '"' not in text and "\r" not in text:
            layouts.setdefault(header, []).append(i)
        else:
            alone.append(i)
    tables = []
    for header, members in layouts.items():
        bodies = [texts[i].partition("\n")[2] for i in members]
        bodies = [body if not body or body.endswith("\n") else body + "\n" for body in bodies]
        rows = [body.count("\n") for body in bodies]
        try:
            table = pd.read_csv(io.StringIO(header + "\n" + "".join(bodies)), dtype=dtype)
        except (ValueError, KeyError):  # one of them is broken: each is parsed on its own
            alone.extend(members)
            continue
        if len(table) != sum(rows):  # a blank line, which the parser skips
            alone.extend(members)
            continue
        table[_RUN_INDEX] = np.repeat(members, rows)
        tables.append((members, table))
    for i in sorted(alone):
        try:
            table = pd.read_csv(io.StringIO(texts[i]), dtype=dtype)
        except (ValueError, KeyError) as err:
            errors[i] = err
            continue
        table[_RUN_INDEX] = i
        tables.append(([i], table))
    return tables, errors


@dataclass
class Job:
    """What `jpwr combine` reads: the runs under the paths given (each
    one's metadata read once), and the earlier runs of a rank, left out"""

    paths: list[Path]
    found: _Found
    runs: list[Run]  # those that count, in the order found
    metas: list[dict]  # each run's, {} where it has none or it is unreadable
    meta_problems: list[str | None]  # each run's unreadable meta file, named
    superseded: list[str]


def read_job(paths: Iterable[str | Path]) -> Job:
    """The job's runs under directories and files (see find_runs)"""
    given = [Path(p) for p in paths]
    found = _find(given)
    listed = [run for run in found.runs if found.has(run, "meta", "json")]
    texts = dict(zip(listed, read_texts([run.path("meta", "json") for run in listed])))
    metas, meta_problems = [], []
    for run in found.runs:
        problem: list[str] = []
        metas.append(_meta(run.path("meta", "json"), texts[run], problem) if run in texts else {})
        meta_problems.append(problem[0] if problem else None)
    kept, superseded = _latest(found.runs, metas)
    return Job(given, found, [found.runs[i] for i in kept], [metas[i] for i in kept],
               [meta_problems[i] for i in kept], superseded)


def _iso_time(text: object) -> float | None:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return None


def _latest(runs: list[Run], metas: list[dict]) -> tuple[list[int], list[str]]:
    """The indexes of the runs to combine, and a note for each one left
    out. A run of a rank (of a host where its files name no rank) is left
    out where a later run of the same rank started after it ended, or after
    it started where it never recorded its end: a requeued job's earlier
    attempt, or an earlier command line run into the same --df-out (the
    files of runs never collide: host and pid are in their names). Adding
    them up would count a device once per run. Runs that overlap in time
    are different processes and all count, as do runs whose meta file
    gives no start."""
    by_key: dict[tuple, list[tuple[float, float | None, int]]] = {}
    for i, (run, meta) in enumerate(zip(runs, metas)):
        rank, in_suffix = meta.get("rank"), _RANK_IN_SUFFIX.search(run.suffix)
        if not isinstance(rank, int) and in_suffix:
            rank = int(in_suffix.group(1))
        started = _iso_time(meta.get("start_time"))
        key = ("rank", rank) if isinstance(rank, int) else ("host", meta.get("host"))
        if started is not None and key != ("host", None):
            by_key.setdefault(key, []).append((started, _iso_time(meta.get("end_time")), i))
    left_out, notes_ = set(), []
    for (kind, which), found in by_key.items():
        found.sort(key=lambda entry: entry[0])
        starts = [started for started, _, _ in found]
        for position, (started, ended, i) in enumerate(found):
            # the first run that started after this one ended
            later = bisect.bisect_left(starts, ended or started, lo=position + 1)
            if later < len(found):
                left_out.add(i)
                notes_.append(f"{runs[i].path('meta', 'json')}: an earlier run of {kind} {which} "
                              f"than {runs[found[later][2]].path('meta', 'json')}; only the later "
                              f"one counts (combine the earlier one by naming its files)")
    return [i for i in range(len(runs)) if i not in left_out], notes_  # in the order found


def _once_per_device(table: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """Each device once, from the lowest rank that reported it."""
    table["rank"] = pd.to_numeric(table["rank"], errors="coerce").astype("Int64")
    table["host"] = table["host"].astype(str)
    table["device"] = table["device"].astype(str)
    by_rank = table["rank"].astype("Float64").fillna(np.inf).to_numpy(float)
    table = table.iloc[np.argsort(by_rank, kind="stable")]
    table = table.drop_duplicates(key, keep="first")
    return table.sort_values("host", kind="stable").reset_index(drop=True)


def _from_samples(job: Job, i: int, problems: list[str]) -> pd.DataFrame | None:
    """A run's table from the samples it flushed, where it wrote no energy
    file (or none that can be read)"""
    run, meta = job.runs[i], job.metas[i]
    power_path = run.path("power", "csv")
    try:
        samples = read_power_csv(power_path)
    except Unreadable as err:
        problems.append(str(err))
        return None
    if samples.empty:
        problems.append(f"{power_path}: no samples (the run wrote none, or its disk was full)")
        return None
    table, origin = energy_table(samples), FROM_SAMPLES
    table.insert(0, "host", meta.get("host", "unknown"))
    table.insert(1, "rank", meta.get("rank") if meta.get("rank") is not None
                 else _rank_of(run, meta))
    taken = meta.get("samples") if meta.get("complete") else None
    if isinstance(taken, int):
        flushed = table["samples"] + table["missing"]
        table["missing"] += (taken - flushed).clip(lower=0)
        origin = FROM_COUNTED_SAMPLES
    table["origin"] = origin
    table["file"] = str(power_path)
    table[_RUN_INDEX] = i
    return table


def _rank_of(run: Run, meta: dict) -> int | None:
    """A run's rank where its table names none: from its suffix, else its metadata"""
    found = _RANK_IN_SUFFIX.search(run.suffix)
    rank = meta.get("rank")
    return int(found.group(1)) if found else rank if isinstance(rank, int) else None


def _read_h5_energy(path: Path) -> pd.DataFrame:
    table = pd.read_hdf(path, key="energy")
    if not isinstance(table, pd.DataFrame):
        raise ValueError(f"{path} is not a jpwr energy file (its energy key holds no table)")
    _check_energy_columns(path, table)
    return complete_energy_columns(table)


def _check_energy_columns(path: Path, table: pd.DataFrame) -> None:
    missing = set(ENERGY_COLUMNS) - set(table.columns)
    if missing:
        raise ValueError(f"{path} is not a jpwr energy file (no {', '.join(sorted(missing))})")


def _energy(job: Job) -> tuple[list[pd.DataFrame], list[str]]:
    """Every run's table (with its run's index), from its energy file or
    else from the samples it flushed, and what could not be read, in the
    order of the runs. A run with neither file is passed over (e.g.
    someone else's metadata.json)."""
    found, runs = job.found, job.runs
    problems: list[list[str]] = [[] for _ in runs]
    csv_energy, h5_energy, fallback = [], [], []
    for i, run in enumerate(runs):
        if found.has(run, "energy", "csv"):
            csv_energy.append(i)
        elif found.has(run, "energy", "h5"):
            h5_energy.append(i)
        elif found.has(run, "power", "csv"):
            fallback.append(i)
        else:
            continue
        if meta_problem := job.meta_problems[i]:
            problems[i].append(meta_problem)
    parsed, errors = _tables({i: runs[i].path("energy", "csv") for i in csv_energy}, _ENERGY_TYPES)
    tables = []
    for members, table in parsed:
        try:
            _check_energy_columns(runs[members[0]].path("energy", "csv"), table)
        except ValueError as err:  # a layout without the columns: each of its files
            errors |= {i: err for i in members}
            continue
        tables.append(_with_run_columns(complete_energy_columns(table), job, "csv"))
    for i in h5_energy:
        try:
            table = _read_h5_energy(runs[i].path("energy", "h5"))
        except Exception as err:  # noqa: BLE001 - pandas and h5 errors alike
            errors[i] = err
            continue
        table[_RUN_INDEX] = i
        tables.append(_with_run_columns(table, job, "h5"))
    for i in sorted(errors):
        path = runs[i].path("energy", "h5" if i in h5_energy else "csv")
        problems[i].append(f"{path}: not a readable jpwr energy file ({one_line(errors[i])})")
        if found.has(runs[i], "power", "csv"):
            fallback.append(i)
    tables += [t for i in sorted(fallback) if (t := _from_samples(job, i, problems[i])) is not None]
    return tables, [p for run_problems in problems for p in run_problems]


def _with_run_columns(table: pd.DataFrame, job: Job, ext: str) -> pd.DataFrame:
    """Rank (where a run's file names none: see _rank_of), origin and file
    of the rows read from energy files"""
    index = table[_RUN_INDEX]
    runs = {int(i): job.runs[int(i)] for i in index.unique()}
    fallback = {i: _rank_of(run, job.metas[i]) for i, run in runs.items()}
    if "rank" not in table:
        table["rank"] = index.map(fallback)
    else:
        unranked = table["rank"].isna().groupby(index).transform("all")
        if unranked.any():
            table["rank"] = table["rank"].astype(object).where(~unranked, index.map(fallback))
    table["origin"] = FROM_ENERGY
    table["file"] = index.map({i: str(run.path("energy", ext)) for i, run in runs.items()})
    return table


def _in_order(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The runs' rows together, in the order the runs were found"""
    table = pd.concat(frames, ignore_index=True)
    order = np.argsort(table[_RUN_INDEX].to_numpy(), kind="stable")
    return table.iloc[order].drop(columns=_RUN_INDEX).reset_index(drop=True)


def combine_job(job: Job) -> pd.DataFrame:
    """One row per (host, method, device) over the job's runs, with
    `counted` telling which rows make up the total."""
    frames, problems = _energy(job)
    if not frames:
        raise NoEnergyData(f"no jpwr energy or power data found in {', '.join(map(str, job.paths))}"
                           + "".join(f"; {p}" for p in problems))
    table = _once_per_device(_in_order(frames), ["host", "method", "device"])
    table["counted"] = counted(table)
    table = table[TABLE_COLUMNS].copy()
    table.attrs[UNREADABLE] = problems
    table.attrs[SUPERSEDED] = job.superseded
    return table


def combine(paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per (host, method, device) over all runs found under paths,
    with `counted` telling which rows make up the total."""
    return combine_job(read_job(paths))


def job_windows(job: Job) -> pd.DataFrame:
    """The named windows of the job's runs, one row per window and (host,
    method, device); empty where no run marked a window. combine_job names
    the runs left out."""
    parsed, errors = _tables({i: run.path("windows", "csv") for i, run in enumerate(job.runs)
                              if job.found.has(run, "windows", "csv")}, _WINDOW_TYPES)
    for i in sorted(errors):  # the whole run then has no window figure
        say(f"warning: {job.runs[i].path('windows', 'csv')}: not a readable jpwr windows file "
            f"({one_line(errors[i])})")
    if not parsed:
        return pd.DataFrame()
    table = _once_per_device(_in_order([table for _, table in parsed]),
                             ["window", "host", "method", "device"])
    table["counted"] = counted(table)
    return table


def combine_windows(paths: Iterable[str | Path]) -> pd.DataFrame:
    """The named windows of all runs under paths (see job_windows)."""
    return job_windows(read_job(paths))


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


def result_lines(table: pd.DataFrame, job: Job) -> list[str]:
    """The lines `jpwr combine` ends with, which a result table reads: the
    summary of the job's table (combine_job), each host's part, each
    scope's total and each named window."""
    return ([summary_line(summarize(table))] + host_lines(table) + scope_lines(table)
            + window_lines(job_windows(job)))


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
    for row in table[table["counted"]].to_dict("records"):
        where = f"{row['host']} {row['method']} {row['device']}"
        if np.isnan(row["energy_wh"]):
            lines.append(f"{where}: no usable samples; it is left out of the total")
        elif row["missing"]:
            marked = (f"; more than {MISSING_LIMIT:.0%} missing: the figure is marked {INCOMPLETE}"
                      if row["missing"] > MISSING_LIMIT * (row["samples"] + row["missing"]) else "")
            lines.append(f"{where}: {row['missing']} samples missing (unanswered or not written); "
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
