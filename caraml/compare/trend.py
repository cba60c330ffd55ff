"""caraml-compare --history DB --out DIR: the results history
(caraml/row/history.py) as DIR/history.html: per benchmark and like-for-like
configuration, each system's figure over the dates and commits of its runs,
a point below its reference band flagged. Every row is read back through
the comparison's own reader (rows.line of the row as recorded, its verdict
included), so a figure here is the figure of the report."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import pandas as pd

from caraml.compare import CompareError, drops, reference, report, rows
from caraml.compare.plots import TICKS, _safe, _save
from caraml.compare.repeats import GROUP, LIKE
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
    no measurement marked (drawn, never checked against a band). A power-limit sweep's
    capped points are not the system's figure: its default point is."""
    ran = rows.ran(rows.at_default_limit(table)[0]).dropna(subset=[FIGURE])
    if ran.empty:
        return ran.assign(verdict=pd.Series(dtype=object), low=pd.Series(dtype=float))
    # a run's measurement wins over its other rows
    ran = ran.assign(measurement=ran["measurement"].astype(bool)).sort_values(["measurement", FIGURE])
    best = ran.groupby(SERIES, dropna=False).tail(1).sort_values("when")
    # each run's figure is checked on its own: an "up to" reference applies to every run's best row
    done = rows.measured(best)
    checks = pd.concat([reference.verdicts(run, refs) for _, run in done.groupby(["run_uuid", "host"])]
                       or [reference.verdicts(done, refs)])
    checks = checks[checks["figure"].map(reference.FIGURES) == FIGURE].set_index("row")
    best["verdict"] = checks["verdict"].reindex(best.index).fillna("no reference")
    best.loc[~best["measurement"], "verdict"] = NOT_A_MEASUREMENT
    best["low"] = checks["low"].reindex(best.index)
    return best


def plot(points: pd.DataFrame, out: Path) -> list[Path]:
    """One figure per benchmark and configuration: a line per system over
    its measurements, each point labelled with its commit, a row that is no
    measurement a hollow marker off the line, a point below its band ringed red, the
    band's lower edge dashed."""
    paths = []
    for (benchmark, *_), group in points.groupby(LIKE, sort=False, dropna=False):
        systems = list(dict.fromkeys(group["system"]))
        fig, ax = plt.subplots(figsize=(8.5, 3.2 + 0.15 * len(systems)))
        for system in systems:
            points = group[group["system"] == system]
            line = points[points["measurement"]]
            drawn = ax.plot(line["when"], line[FIGURE], marker="o", lw=1.2,
                            label=f"{system} ({points['device_unit'].iloc[0]})")[0]
            short = points[~points["measurement"]]
            if not short.empty:
                ax.scatter(short["when"], short[FIGURE], s=36, facecolors="none",
                           edgecolors=drawn.get_color(), label=f"{system}: {NOT_A_MEASUREMENT}")
            for when, value, commit in zip(points["when"], points[FIGURE], points["commit"]):
                ax.annotate(str(commit)[:7], (when, value), textcoords="offset points", xytext=(0, 6),
                            ha="center", fontsize=6)
            low = line["low"].dropna()
            if not low.empty:
                ax.axhline(low.iloc[-1], color=drawn.get_color(), ls="--", lw=0.8)
            below = line[line["verdict"] == "below"]
            ax.scatter(below["when"], below[FIGURE], s=140, facecolors="none", edgecolors="red", lw=1.5,
                       label=f"{system}: below its reference band" if not below.empty else None)
        ax.yaxis.set_major_formatter(TICKS)
        locator = mdates.AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        ax.margins(y=0.15)  # room for the commit above the highest point
        ax.tick_params(labelsize=7)
        ax.set_ylabel(f"{group['unit'].iloc[0]}/s per device", fontsize=8)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        like = group["like"].iloc[0]
        ax.set_title(f"{benchmark} {like}: best row of each run (commit above each point; hollow: not a "
                     "measurement; dashed: lower edge of the reference band)", fontsize=8)
        paths.append(_save(fig, out / f"history_{_safe(f'{benchmark}_{like}')}.png"))
    return paths


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
    below: list[str]  # each point below its reference band, in one line
    ending_below: int  # series whose latest measurement is below its band
    drops: list[str]  # each point below its own series' earlier runs, in one line
    ending_dropped: int  # series whose latest measurement is such a drop


def write(db: Path, refs: pd.DataFrame, out: Path) -> Found:
    """DIR/history.html and history.csv; the points below a band and those
    below their own earlier runs, one line each, and how many series end so."""
    table = load(db)
    points = series(table, refs)
    out.mkdir(parents=True, exist_ok=True)
    points.drop(columns="when").assign(date=points["when"].astype(str)).to_csv(out / "history.csv",
                                                                                 index=False)
    pngs = plot(points, out)
    under = points[points["verdict"] == "below"]
    below = [f"{r['system']} {r['benchmark']} {r['like']}: {number(r['per_s_per_device'])} {r['unit']}/s "
             f"per {r['device_unit']} on {r['when']:%Y-%m-%d} (commit {r['commit']}, run {r['run_uuid'][:8]} "
             f"on {r['host']}) is below its reference band ({number(r['low'])})"
             for r in under.to_dict("records")]
    latest = rows.measured(points).groupby(GROUP, dropna=False).tail(1)
    ending_below = int((latest["verdict"] == "below").sum())
    run_drops, ending_dropped = drops.run_to_run(points, GROUP)
    runs = table.groupby(["run_uuid", "host"]).ngroups
    summary = [f"{len(table)} recorded rows of {runs} runs ({table['system'].nunique()} systems) from {db}.",
               f"{len(points)} points (each run's best row per configuration; "
               f"{len(points) - len(rows.measured(points))} of them no measurements), "
               f"{len(below)} below their reference band, {ending_below} series ending below it; "
               f"{len(run_drops)} below their own earlier runs, {ending_dropped} series ending so."]
    (out / "history.html").write_text(report.page(
        "history.html.j2", title="caraml-compare: results history", summary=summary,
        drops=below + [f"dropped run to run: {line}" for line in run_drops],
        plots=[report.image(p) for p in pngs], points=display(points),
        not_measured=report.plain_display(table.drop(index=rows.measured(table).index)[
            ["system", "benchmark", "like", "state", "reason", "not_a_measurement", "date", "run_uuid",
             "host"]])))
    return Found(below, ending_below, run_drops, ending_dropped)
