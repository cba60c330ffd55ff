"""caraml-compare RUN_DIR... --out DIR: JUBE runs of several systems side by
side, from the row.json files of their work packages (docs/compare.md).
Exit status 0; 1 when a system has a benchmark with no measured row (the
report is still written, with its failure); 2 on bad input or nothing to compare (one line
on stderr); 3 when a figure falls below its reference band (3 wins over 1)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from caraml.benchmarks import UnknownBenchmark
from caraml.compare import (CompareError, decision, figures, frontier, plots, power, prices, reference,
                            report, rows, trend)
from caraml.compare.jobs import IMAGENET_TRAIN_IMAGES, OPERATOR_SAMPLES_PER_EPOCH, Jobs
from jpwr.version import VersionAction

SYSTEM_FAILED, BAD_INPUT, BELOW_BAND = 1, 2, 3


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="caraml-compare",
        description="Compare JUBE runs of this suite's benchmarks from several systems: tables, time and "
                    "energy to solution, scaling efficiency, reference bands, plots and report.html.")
    p.add_argument("runs", nargs="*", metavar="[SYSTEM=]RUN_DIR",
                   help="a JUBE run directory, its outpath (latest run) or a directory of outpaths; "
                        "SYSTEM= names the system (default: the name in its row.json)")
    p.add_argument("--history", type=Path, metavar="DB",
                   help="instead of runs: the results history (results/caraml_rows.sqlite) as "
                        "DIR/history.html, each system's figure over its runs' dates and commits")
    p.add_argument("--out", required=True, type=Path, help="directory to write the comparison into")
    p.add_argument("--reference-system",
                   help="system the ratios are taken against (default: the first given)")
    p.add_argument("--references", type=Path, default=reference.DEFAULT_FILE,
                   help="reference figures with tolerance bands, YAML or CSV (default: the shipped file)")
    p.add_argument("--no-references", action="store_true", help="check no figure against a band")
    p.add_argument("--prices", type=Path,
                   help="prices per system (YAML: node-hour or capital cost and lifetime, electricity per "
                        "kWh, PUE): adds cost to solution to the decision page")
    p.add_argument("--all-runs", action="store_true", help="every run of an outpath, not only its latest")
    p.add_argument("--tokens-per-parameter", type=float, default=Jobs.tokens_per_parameter,
                   help="LLM job: tokens per model parameter (default 20)")
    p.add_argument("--llm-tokens", type=float, help="LLM job: a fixed number of tokens instead")
    p.add_argument("--epochs", type=float, default=Jobs.epochs, help="image job: epochs (default 90)")
    p.add_argument("--images-per-epoch", type=int, default=IMAGENET_TRAIN_IMAGES,
                   help="image job: images per epoch (default: ImageNet's 1 281 167)")
    p.add_argument("--operator-epochs", type=float, default=Jobs.operator_epochs,
                   help="operator job: epochs (default 500)")
    p.add_argument("--operator-samples-per-epoch", type=int, default=OPERATOR_SAMPLES_PER_EPOCH,
                   help="operator job: samples per epoch (default 1024, the driver's synthetic epoch)")
    p.add_argument("--version", action=VersionAction)
    return p


def _reference_system(table: pd.DataFrame, wanted: str | None) -> str:
    # smoke runs only: the report still shows them, with no ratio to anything
    systems = list(dict.fromkeys(rows.measured(table)["system"])) or \
        list(dict.fromkeys(rows.ran(table)["system"]))
    if wanted is None:
        return systems[0]
    if wanted not in systems:
        raise CompareError(f"--reference-system {wanted}: no measured row of that system given "
                           f"({' '.join(systems)})")
    return wanted


def _failed_benchmarks(table: pd.DataFrame) -> list[str]:
    """One line per system and benchmark it ran without a measured row, with its causes."""
    lines = []
    for (system, benchmark), group in table.groupby(["system", "benchmark"], sort=False):
        if rows.measured(group).empty:
            causes = "; ".join(dict.fromkeys(k or (f"{s}: {r}" if r else s) for s, r, k in
                                             zip(group["status"], group["reason"], group["smoke"])))
            name = system if benchmark == "n/a" else f"{system} {benchmark}"
            lines.append(f"{name}: no measured row ({len(group)} rows: {causes})")
    return lines


def _timelines(table: pd.DataFrame, out: Path) -> list[Path]:
    paths = []
    for index, row in rows.ran(table).iterrows():  # a smoke run's power is worth a look too
        line = power.timeline(row["work_package"])
        if line is not None:
            title = f"{row['system']} {row['benchmark']} {row['like']} batch {row['global_batch']:g}"
            name = "".join(c if c.isalnum() else "_" for c in f"power_{index:03d}_{row['system']}")
            paths.append(plots.power_timeline(line, title, out / f"{name}.png"))
    return paths


def draw_history(args: argparse.Namespace) -> int:
    """--history: exit 3 when a series' latest point is below its reference band."""
    refs = reference.load(args.references) if not args.no_references else reference.load_empty()
    drops, ending_below = trend.write(args.history, refs, args.out)
    for line in drops:
        print(f"BELOW BAND: {line}")
    status = BELOW_BAND if ending_below else 0
    print(f"wrote {args.out}/history.html ({len(drops)} points below their band, {ending_below} series "
          f"ending below it); exit status {status}")
    return status


def compare(args: argparse.Namespace) -> int:
    if args.history is not None:
        if args.runs:
            raise CompareError("give run directories or --history, not both")
        return draw_history(args)
    if not args.runs:
        raise CompareError("no run directory given; give [SYSTEM=]RUN_DIR... or --history DB")
    loaded = rows.load(args.runs, args.all_runs)
    rows.check_comparable(loaded)
    # each system ranks by its run at the devices' own limit; the sweep's capped points get their section
    table, capped = rows.at_default_limit(loaded)
    if rows.ran(table).empty:
        raise CompareError("only power-capped rows ran: the comparison ranks each system by its run at the "
                           "devices' own limit; add the sweep's 'default' point or a run without a sweep")
    ref_system = _reference_system(table, args.reference_system)
    refs = reference.load(args.references) if not args.no_references else reference.load_empty()
    currency, price_list = prices.load(args.prices) if args.prices else ("", {})
    jobs = Jobs(tokens_per_parameter=args.tokens_per_parameter, llm_tokens=args.llm_tokens,
                epochs=args.epochs, images_per_epoch=args.images_per_epoch,
                operator_epochs=args.operator_epochs,
                operator_samples_per_epoch=args.operator_samples_per_epoch)

    table = figures.mark_best(table)
    checks = reference.verdicts(rows.measured(table), refs)  # a smoke run is checked against no band
    table["verdict"] = reference.row_verdicts(table, checks)
    table = figures.add_ratios(table, ref_system)
    head, refused = figures.headline(table, ref_system)
    solutions = figures.time_and_energy_to_solution(table, jobs)
    scaling = figures.scaling_efficiency(table)
    failed_systems = _failed_benchmarks(table)
    every = pd.concat([table, capped], ignore_index=True)
    failed_rows = every.drop(index=rows.measured(every).index)  # failed, not run, or a smoke run
    sweeps = frontier.sweeps(loaded, jobs)

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    every.to_csv(out / "comparison.csv", index=False)
    head.to_csv(out / "headline.csv", index=False)
    solutions.to_csv(out / "time_to_solution.csv", index=False)
    scaling.to_csv(out / "scaling.csv", index=False)
    checks.drop(columns="row").to_csv(out / "verdicts.csv", index=False)

    decisions, pngs = [], []
    for chosen in decision.decide(table, head, solutions, jobs, ref_system):
        charts = [decision.ranked_chart(chosen, out), decision.solution_chart(chosen, out)]
        costs = prices.cost(chosen.solution, price_list) if args.prices else pd.DataFrame()
        unpriced = prices.unpriced(chosen.solution, price_list) if args.prices else []
        if not costs.empty:
            charts.append(decision.cost_chart(chosen, costs, currency, out))
            costs.assign(benchmark=chosen.benchmark, like=chosen.like).to_csv(
                out / f"cost_{plots._safe(f'{chosen.benchmark}_{chosen.like}')}.csv", index=False)
        charts = [c for c in charts if c is not None]
        pngs += charts
        decisions.append({"name": chosen.benchmark, "like": chosen.like, "leaders": chosen.leaders,
                          "unranked": chosen.unranked, "charts": [report.image(p) for p in charts],
                          "unpriced": unpriced})
    sweep_pages = []
    for sweep in sweeps:
        charts = [c for c in [frontier.chart(sweep, out)] if c is not None]
        pngs += charts
        sweep_pages.append({"id": plots._safe(sweep.title), "title": sweep.title, "headline": sweep.headline,
                            "job": sweep.job, "representative": sweep.representative,
                            "charts": [report.image(p) for p in charts],
                            "points": report.sweep_display(sweep.points)})
    if sweeps:
        pd.concat([s.points.assign(sweep=s.title) for s in sweeps])[frontier.CSV_COLUMNS].to_csv(
            out / "frontier.csv", index=False)
    benchmarks = []
    for benchmark in dict.fromkeys(b for b in table["benchmark"] if b != "n/a"):
        in_head = head[head["benchmark"] == benchmark]
        in_rows = table[table["benchmark"] == benchmark]
        bars = plots.bars(in_head, refs, out)
        heatmaps = plots.heatmaps(in_rows, out)
        pngs += bars + heatmaps
        head_display = report.rows_display(in_head, headline=True)
        full_display = report.rows_display(in_rows, headline=False)
        sol = solutions[solutions["benchmark"] == benchmark] if not solutions.empty else solutions
        notes = [r for r in refused if r.startswith(f"{benchmark} ")]
        swept = [s for s in sweeps if s.benchmark == benchmark]
        (out / f"comparison_{benchmark}.md").write_text("".join([
            f"# {benchmark}: headline (reference system {ref_system})\n\n", report.markdown(head_display),
            *(f"\n- {n}" for n in notes), "\n\n## All rows\n\n", report.markdown(full_display),
            "\n## Time and energy to solution\n\n", report.markdown(report.solution_display(sol)),
            *(f"\n## Power-limit sweep: {s.title}\n\n{s.headline}\n\n"
              + report.markdown(report.sweep_display(s.points)) for s in swept)]))
        benchmarks.append({"name": benchmark, "headline": head_display, "refused": notes,
                           "sweeps": [s.headline for s in swept],
                           "bars": [report.image(p) for p in bars], "full": full_display,
                           "heatmaps": [report.image(p) for p in heatmaps]})
    timelines = _timelines(table, out)
    scaling_plots = plots.scaling(scaling, out)
    pngs += timelines + scaling_plots

    systems = list(dict.fromkeys(table["system"]))
    below = checks[checks["verdict"] == "below"]
    status = BELOW_BAND if not below.empty else SYSTEM_FAILED if failed_systems else 0
    summary = [f"{len(systems)} systems: {', '.join(systems)}; reference system {ref_system}.",
               f"{len(rows.measured(table))} measured rows, {len(failed_rows)} not measurements, "
               f"{len(failed_systems)} benchmarks of a system without a measurement, "
               f"{len(below)} figures below their band.",
               f"Exit status {status}: " + {0: "every system measured, no figure below its band.",
                                            SYSTEM_FAILED: "a system has a benchmark without a measured "
                                                           "row (listed below).",
                                            BELOW_BAND: "a figure is below its reference band."}[status]]
    (out / "report.html").write_text(report.html_page(
        title="caraml-compare: " + " vs ".join(systems), summary=summary, reference=ref_system,
        decisions=decisions, priced=args.prices is not None, sweeps=sweep_pages,
        benchmarks=benchmarks, failed_systems=failed_systems, cards=report.cards(table),
        solution=report.solution_display(solutions),
        timelines=[report.image(p) for p in timelines],
        scaling=report.plain_display(scaling), scaling_plots=[report.image(p) for p in scaling_plots],
        verdicts=report.plain_display(checks.drop(columns="row")),
        references=report.plain_display(refs[["system", "benchmark", "model", "precision", "size",
                                               "global_batch", "devices", "figure", "value", "lower", "upper",
                                               "kind", "source"]]),
        failed_rows=report.plain_display(failed_rows[["system", "benchmark", "like", "limit_asked", "status",
                                                      "reason", "smoke", "row_file"]].rename(
            columns={"limit_asked": "power limit asked"}))))

    for line in failed_systems:
        print(f"failed benchmark: {line}")
    for row in failed_rows.itertuples():
        why = row.smoke or f"{row.status} {row.reason}".rstrip()
        limit = f" at power limit {row.limit_asked}" if row.limit_swept else ""
        print(f"not a measurement: {row.system} {row.benchmark} {row.like}{limit}: {why}")
    for sweep in sweeps:
        print(f"power-limit sweep: {sweep.headline}")
        for point in sweep.points[sweep.points["kind"] == frontier.FLAGGED].itertuples():
            print(f"power-limit sweep point flagged: {sweep.title} at {point.limit}: {point.off}")
    for row in below.itertuples():
        print(f"BELOW BAND: {row.system} {row.like} batch {row.global_batch:g} {row.figure} "
              f"{row.measured:.4g} < {row.low:.4g} ({row.origin}: {row.source})")
    print(f"wrote {out}/report.html, {out}/comparison.csv and {len(pngs)} plots ({len(every)} rows, "
          f"{len(failed_rows)} not measurements, {len(checks)} checks, {len(below)} below their band); "
          f"exit status {status}")
    return status


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return compare(args)
    except (CompareError, UnknownBenchmark) as err:  # the latter: a site's CARAML_BENCHMARKS
        print(f"caraml-compare: error: {err}", file=sys.stderr)
        return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
