"""A comparison (caraml/compare/comparison.py) written out: its CSV files,
the charts (caraml/compare/charts/), a markdown file per benchmark and the
self-contained report.html, and the lines caraml-compare prints; and the
results history (caraml/compare/trend.py) as history.html. Every file is
written new in a private folder and renamed into OUT: a link placed in OUT
is replaced, never written through, and a reader never sees half a file."""

from __future__ import annotations

import ctypes
import json
import math
import os
import shutil
import signal
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from caraml.compare import frontier, left_out, power, report, rows, trend
from caraml.compare.charts import decision as decision_charts
from caraml.compare.charts import frontier as frontier_chart
from caraml.compare.charts import history as history_charts
from caraml.compare.charts import power as power_charts
from caraml.compare.charts import rows as row_charts
from caraml.compare.comparison import Comparison, Decided
from caraml.compare.report import slug


def _csv_files(c: Comparison, out: Path) -> None:
    c.every.to_csv(out / "comparison.csv", index=False)
    c.head.to_csv(out / "headline.csv", index=False)
    c.solutions.to_csv(out / "time_to_solution.csv", index=False)
    c.scaling.to_csv(out / "scaling.csv", index=False)
    c.checks.drop(columns="row").to_csv(out / "verdicts.csv", index=False)
    for decided in c.decided:
        chosen = decided.decision
        if not decided.costs.empty:
            decided.costs.assign(benchmark=chosen.benchmark, like=chosen.like).to_csv(
                out / f"cost_{slug(f'{chosen.benchmark}_{chosen.like}')}.csv", index=False)
    if c.sweeps:
        pd.concat([s.points.assign(sweep=s.title) for s in c.sweeps])[frontier.CSV_COLUMNS].to_csv(
            out / "frontier.csv", index=False)


def caveats(c: Comparison, decided: Decided) -> list[str]:
    """What the decision's sentences do not cover, right under them: the
    systems left out of a ranking and why, those without a price and why."""
    unpriced = [f"No cost for {item.what}: {item.why}." for item in c.left_out
                if item.kind == left_out.UNPRICED and item.system in decided.unpriced]
    return [*decided.decision.unranked, *unpriced]


def _plain(value: object) -> object:
    """A figure for JSON: NaN as null, numpy scalars as Python's."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value.item() if isinstance(value, (np.generic, np.ndarray)) else value


def decision_record(c: Comparison) -> dict:
    """decision.json: what the first screen says, each sentence with its figures."""
    return {
        "exit_status": c.status, "summary": c.summary(), "reference_system": c.reference_system,
        "drops": c.drops, "unused_prices": c.unused_prices, "currency": c.currency,
        "left_out": [item.record() for item in c.left_out],
        "contestable": [item.record() for item in c.contestable],
        "benchmarks": [{"benchmark": d.decision.benchmark, "configuration": d.decision.like,
                        "sentences": d.decision.leaders, "caveats": caveats(c, d),
                        "figures": [{k: _plain(v) for k, v in m.items()} for m in d.decision.margins]}
                       for d in c.decided]}


# the first screen's two lists: their titles, and their keys in decision.json
LISTS = (("Left out of the decision", "left_out"), ("What a vendor may contest", "contestable"))


def said_left_out(c: Comparison) -> list[tuple[str, list[str]]]:
    """The first screen's two lists, each line one kind and why with what it names."""
    return [(title, left_out.grouped(getattr(c, key))) for title, key in LISTS]


def _items(record: dict, key: str) -> list[left_out.Item]:
    return [left_out.Item(**item) for item in record[key]]


def summary_markdown(record: dict) -> str:
    """summary.md: the first screen's sentences, as a manager pastes them."""
    parts = ["# caraml-compare: the decision\n\n", *(f"{line}\n" for line in record["summary"])]
    parts += [f"\n**{line}**\n" for line in record["drops"]]
    parts += [f"\n{record['unused_prices']}\n"] if record["unused_prices"] else []
    for title, key in LISTS:
        said = left_out.grouped(_items(record, key))
        parts += [f"\n## {title}\n\n", *(f"- {line}\n" for line in said or ["none"])]
    for bench in record["benchmarks"]:
        parts.append(f"\n## {bench['benchmark']}: {bench['configuration']}\n\n")
        parts += [f"- {line}\n" for line in bench["sentences"]]
        parts += ["\nCaveats:\n\n", *(f"- {line}\n" for line in bench["caveats"])] if bench["caveats"] else []
    return "".join(parts)


def _decisions(c: Comparison, out: Path, pngs: list[Path]) -> list[dict]:
    pages = []
    for decided in c.decided:
        chosen = decided.decision
        charts = decision_charts.charts(chosen, decided.costs, c.currency, out)
        pngs += charts
        pages.append({"name": chosen.benchmark, "like": chosen.like, "leaders": chosen.leaders,
                      "caveats": caveats(c, decided), "charts": [report.image(p) for p in charts]})
    return pages


def _sweeps(c: Comparison, out: Path, pngs: list[Path]) -> list[dict]:
    pages = []
    for sweep in c.sweeps:
        charts = [chart for chart in [frontier_chart.chart(sweep, out)] if chart is not None]
        pngs += charts
        pages.append({"id": slug(sweep.title), "title": sweep.title, "headline": sweep.headline,
                      "job": sweep.job, "representative": sweep.representative,
                      "charts": [report.image(p) for p in charts],
                      "points": report.sweep_display(sweep.points)})
    return pages


def _benchmarks(c: Comparison, out: Path, pngs: list[Path]) -> list[dict]:
    """Per benchmark: its headline, every row and its sweeps, as markdown
    (comparison_<benchmark>.md) and as the page's section."""
    pages = []
    for benchmark in c.benchmarks:
        in_head = c.head[c.head["benchmark"] == benchmark]
        in_rows = c.table[c.table["benchmark"] == benchmark]
        bars = row_charts.bars(in_head, c.refs, out)
        heatmaps = row_charts.heatmaps(in_rows, out)
        pngs += bars + heatmaps
        head_display = report.rows_display(in_head, headline=True)
        full_display = report.rows_display(in_rows, headline=False)
        sol = c.solutions[c.solutions["benchmark"] == benchmark] if not c.solutions.empty else c.solutions
        notes = [str(r) for r in c.refused if r.benchmark == benchmark]
        swept = [s for s in c.sweeps if s.benchmark == benchmark]
        (out / f"comparison_{benchmark}.md").write_text("".join([
            f"# {benchmark}: headline (reference system {c.reference_system})\n\n",
            report.markdown(head_display), *(f"\n- {n}" for n in notes), "\n\n## All rows\n\n",
            report.markdown(full_display), "\n## Time and energy to solution\n\n",
            report.markdown(report.solution_display(sol)),
            *(f"\n## Power-limit sweep: {s.title}\n\n{s.headline}\n\n"
              + report.markdown(report.sweep_display(s.points)) for s in swept)]))
        pages.append({"name": benchmark, "headline": head_display, "refused": notes,
                      "sweeps": [s.headline for s in swept], "bars": [report.image(p) for p in bars],
                      "full": full_display, "heatmaps": [report.image(p) for p in heatmaps]})
    return pages


def _timelines(table: pd.DataFrame, out: Path) -> list[power_charts.Drawn]:
    """One power timeline per configuration that ran (power.fold), its
    repeats folded into it, drawn on every CPU this process may use."""
    jobs = power_charts.jobs(power.fold(table), out)
    workers = min(len(jobs), len(os.sched_getaffinity(0)))
    if workers < 2:
        drawn = [power_charts.draw(job) for job in jobs]
    else:
        with ProcessPoolExecutor(max_workers=workers, initializer=_end_with_parent,
                                 initargs=(os.getpid(),)) as pool:
            drawn = list(pool.map(power_charts.draw, jobs, chunksize=max(1, len(jobs) // (4 * workers))))
    return [found for found in drawn if found is not None]


def _folded(drawn: list[power_charts.Drawn]) -> pd.DataFrame:
    """Which runs each timeline shows: the one in colour, those in grey, those without samples."""
    return pd.DataFrame({"chart": [d.path.stem for d in drawn], "configuration": [d.title for d in drawn],
                         "in colour": [d.coloured for d in drawn],
                         "in grey (its other runs)": ["; ".join(d.grey) or "none" for d in drawn],
                         "no power samples": ["; ".join(d.without_samples) or "none" for d in drawn]})


_PR_SET_PDEATHSIG = 1


def _end_with_parent(parent: int) -> None:
    """A drawing worker ends with caraml-compare, whatever ends it (a
    SIGKILL too, which leaves no code of the parent to stop its pool):
    the kernel kills it then (Linux); one whose parent is gone already ends."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def write(c: Comparison, out: Path) -> int:
    """Every file of the comparison into OUT, each made new and renamed
    into place; the number of charts."""
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".caraml-compare-", dir=out))
    try:
        charts = _write(c, staging)
        for made in sorted(staging.iterdir()):
            os.replace(made, out / made.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return charts


def _write(c: Comparison, out: Path) -> int:
    _csv_files(c, out)
    record = decision_record(c)
    (out / "decision.json").write_text(json.dumps(record, indent=1) + "\n")
    (out / "summary.md").write_text(summary_markdown(record))
    pngs: list[Path] = []
    decisions, sweeps, benchmarks = _decisions(c, out, pngs), _sweeps(c, out, pngs), _benchmarks(c, out, pngs)
    timelines = _timelines(c.table, out)
    scaling_plots = row_charts.scaling(c.scaling, out)
    pngs += [d.path for d in timelines] + scaling_plots
    (out / "report.html").write_text(report.html_page(
        title="caraml-compare: " + " vs ".join(c.systems), summary=c.summary(), reference=c.reference_system,
        drops=c.drops, unused_prices=c.unused_prices, left_out=said_left_out(c),
        decisions=decisions, priced=c.priced, sweeps=sweeps,
        benchmarks=benchmarks, failed_systems=c.failed_systems, cards=report.cards(c.table),
        solution=report.solution_display(c.solutions),
        timelines=[report.image(d.path) for d in timelines], folded=_folded(timelines),
        runs_folded=sum(1 + len(d.grey) for d in timelines),
        scaling=report.plain_display(c.scaling), scaling_plots=[report.image(p) for p in scaling_plots],
        verdicts=report.plain_display(c.checks.drop(columns="row")),
        references=report.plain_display(c.refs[["system", "benchmark", "model", "precision", "size",
                                                 "global_batch", "devices", "figure", "value", "lower",
                                                 "upper", "kind", "source"]]),
        failed_rows=report.plain_display(c.failed_rows[["system", "benchmark", "like", "power_limit", "state",
                                                        "reason", "not_a_measurement", "row_file"]].rename(
            columns={"power_limit": "power limit asked"}))))
    return len(pngs)


def lines(c: Comparison, out: Path, charts: int) -> list[str]:
    """What caraml-compare prints: each benchmark of a system without a
    measurement, each row that is none and why, the sweeps, each figure
    below its band, and what was written."""
    said = [f"REFUSED: {i.system} {i.benchmark} {i.configuration} ({i.run}): {i.why}"
            for i in c.left_out if i.kind == left_out.REFUSED_ROW]
    said += [f"unaudited: {i.system} {i.benchmark} {i.configuration}: {i.why}"
             for i in c.left_out if i.kind == left_out.UNAUDITED_ROW]
    said += [f"not pooled: {line}" for line in c.apart]
    said += [f"DROP: {line}" for line in c.drops]
    said += [f"unused prices: {c.unused_prices}"] if c.unused_prices else []
    said += [f"left out: {item.what}: {item.why}" for item in c.left_out if item.kind == left_out.UNPRICED]
    said += [f"may contest: {line}" for line in left_out.grouped(c.contestable)]
    said += [f"decision {d.decision.benchmark}: {line}" for d in c.decided for line in d.decision.leaders]
    said += [f"failed benchmark: {line}" for line in c.failed_systems]
    for row in c.failed_rows.itertuples():
        limit = f" at power limit {row.power_limit}" if row.limit_swept else ""
        said.append(f"not a measurement: {row.system} {row.benchmark} {row.like}{limit}: "
                    f"{row.not_a_measurement}")
    for sweep in c.sweeps:
        said.append(f"power-limit sweep: {sweep.headline}")
        said += [f"power-limit sweep point flagged: {sweep.title} at {point.limit}: {point.off}"
                 for point in sweep.points[sweep.points["kind"] == frontier.FLAGGED].itertuples()]
    said += [f"BELOW BAND: {row.system} {row.like} batch {row.global_batch:g} {row.figure} "
             f"{row.measured:.4g} < {row.low:.4g} ({row.origin}: {row.source})"
             for row in c.below.itertuples()]
    said.append(f"wrote {out}/report.html, {out}/comparison.csv and {charts} plots ({len(c.every)} rows, "
                f"{len(c.failed_rows)} not measurements, {len(c.checks)} checks, {len(c.below)} below their "
                f"band); exit status {c.status}")
    return said


def write_history(found: trend.Found, out: Path) -> None:
    """DIR/history.html and history.csv of the results history's points."""
    out.mkdir(parents=True, exist_ok=True)
    points = found.points
    points.drop(columns="when").assign(date=points["when"].astype(str)).to_csv(out / "history.csv",
                                                                                 index=False)
    pngs = history_charts.plot(points, out)
    table = found.table
    (out / "history.html").write_text(report.page(
        "history.html.j2", title="caraml-compare: results history", summary=found.summary,
        drops=found.below + [f"dropped run to run: {line}" for line in found.drops],
        plots=[report.image(p) for p in pngs], points=trend.display(points),
        not_measured=report.plain_display(table.drop(index=rows.measured(table).index)[
            ["system", "benchmark", "like", "state", "reason", "not_a_measurement", "date", "run_uuid",
             "host"]])))
