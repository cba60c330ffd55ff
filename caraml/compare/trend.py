"""caraml-compare --history DB --out DIR: the results history
(caraml/row/history.py) as DIR/history.html: per benchmark and like-for-like
configuration, each system's figure over the dates and commits of its runs,
a point below its reference band flagged. Every row is read back through
the comparison's own reader (rows.line of the row as recorded, its verdict
included), so a figure here is the figure of the report. Computed here,
drawn by caraml/compare/charts/history.py and written by
caraml/compare/output.py: nothing here imports matplotlib."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from caraml.compare import CompareError, drops, reference, rows
from caraml.compare.repeats import GROUP
from caraml.compare.units import count, number
from caraml.row import history, row_json
from caraml.row.verdict import NOT_A_MEASUREMENT

FIGURE = "per_s_per_device"
SERIES = [*GROUP, "run_uuid", "host"]


def load(db: Path) -> pd.DataFrame:
    """Every recorded row as a line of the comparison, with its run's key and when it ran."""
    try:
        lines = history.read(db)
    except FileNotFoundError:
        raise CompareError(f"{db}: no such results history; the row model writes it "
                           f"(results/caraml_rows.sqlite in the checkout, or ${history.ENV})") from None
    except (sqlite3.Error, ValueError) as err:  # a JSON line that is not a row: ValueError
        raise CompareError(f"{db}: not a results history ({' '.join(str(err).split())[:200]})") from None
    if not lines:
        raise CompareError(f"{db}: the results history holds no row yet")
    out = []
    for line in lines:
        row = line["row"]
        flat = rows.line(row, rows.RunDir(Path(line["run_dir"] or "."), None),
                         Path(row.work_package or ".") / row_json.FILE_NAME)
        when = pd.to_datetime(flat["date"] if flat["date"] != "n/a" else line["recorded_at"], utc=True,
                              errors="coerce")
        out.append({**flat, "run_uuid": line["run_uuid"], "host": line["host"],
                    "recorded_at": line["recorded_at"], "when": when})
    return pd.DataFrame(out)


def series(table: pd.DataFrame, refs: pd.DataFrame) -> pd.DataFrame:
    """Each run's best row per system and configuration, oldest first: a
    measurement with its verdict against the reference band, a row that is
    no measurement marked (drawn, never checked against a band), `below`
    where a measurement is below its band, `low` the band's lower edge. A power-limit sweep's
    capped points are not the system's figure: its default point is."""
    ran = rows.ran(rows.at_default_limit(table)[0]).dropna(subset=[FIGURE])
    if ran.empty:
        return ran.assign(verdict=pd.Series(dtype=object), low=pd.Series(dtype=float),
                          below=pd.Series(dtype=bool))
    # a run's measurement wins over its other rows
    ran = ran.assign(measurement=ran["measurement"].astype(bool)).sort_values(["measurement", FIGURE])
    best = ran.groupby(SERIES, dropna=False).tail(1).sort_values("when")
    # each run's figure is checked on its own: an "up to" reference applies to every run's best row
    done = rows.measured(best)
    checks = pd.concat([reference.verdicts(run, refs) for _, run in done.groupby(["run_uuid", "host"])]
                       or [reference.verdicts(done, refs)])
    checks = checks[checks["figure"].map(reference.FIGURES) == FIGURE].set_index("row")
    best["verdict"] = checks["verdict"].reindex(best.index).fillna("no reference")
    best["below"] = best["measurement"] & (best["verdict"] == reference.BELOW)
    best.loc[~best["measurement"], "verdict"] = NOT_A_MEASUREMENT
    best["low"] = checks["low"].reindex(best.index)
    return best


def display(points: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "date": points["when"].dt.strftime("%Y-%m-%d %H:%M"), "system": points["system"],
        "configuration": points["benchmark"] + " " + points["like"],
        "batch": points["global_batch"].map(count), "commit": points["commit"],
        "run": points["run_uuid"].str[:8] + " on " + points["host"],
        "throughput per device": [f"{number(v)} {u}/s per {d}" for v, u, d in
                                  zip(points[FIGURE], points["unit"], points["device_unit"])],
        "verdict": points["verdict"]})


@dataclass
class Found:
    table: pd.DataFrame  # every recorded row, as a line of the comparison
    points: pd.DataFrame  # each run's best row per system and configuration (series)
    summary: list[str]  # the page's first lines
    below: list[str]  # each point below its reference band, in one line
    ending_below: int  # series whose latest measurement is below its band
    drops: list[str]  # each point below its own series' earlier runs, in one line
    ending_dropped: int  # series whose latest measurement is such a drop


def find(db: Path, refs: pd.DataFrame) -> Found:
    """The history's points, those below a band and those below their own
    earlier runs, one line each, and how many series end so."""
    table = load(db)
    points = series(table, refs)
    under = points[points["below"]]
    below = [f"{r['system']} {r['benchmark']} {r['like']}: {number(r['per_s_per_device'])} {r['unit']}/s "
             f"per {r['device_unit']} on {r['when']:%Y-%m-%d} (commit {r['commit']}, run {r['run_uuid'][:8]} "
             f"on {r['host']}) is below its reference band ({number(r['low'])})"
             for r in under.to_dict("records")]
    latest = rows.measured(points).groupby(GROUP, dropna=False).tail(1)
    ending_below = int(latest["below"].sum())
    run_drops, ending_dropped = drops.run_to_run(points, GROUP)
    runs = table.groupby(["run_uuid", "host"]).ngroups
    summary = [f"{len(table)} recorded rows of {runs} runs ({table['system'].nunique()} systems) from {db}.",
               f"{len(points)} points (each run's best row per configuration; "
               f"{len(points) - len(rows.measured(points))} of them no measurements), "
               f"{len(below)} below their reference band, {ending_below} series ending below it; "
               f"{len(run_drops)} below their own earlier runs, {ending_dropped} series ending so."]
    return Found(table, points, summary, below, ending_below, run_drops, ending_dropped)
