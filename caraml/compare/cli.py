"""caraml-compare RUN_DIR... --out DIR: JUBE runs of several systems side by
side (docs/compare.md). Exit status 0, 2 on bad input (one line on stderr),
3 when a figure falls below its reference band."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from caraml.compare import CompareError, figures, plots, power, reference, report, runs
from caraml.compare.jobs import IMAGENET_TRAIN_IMAGES, Jobs
from jpwr.version import VersionAction

BAD_INPUT, BELOW_BAND = 2, 3


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="caraml-compare",
        description="Compare JUBE runs of this suite's benchmarks from several systems: tables, time and "
                    "energy to solution, scaling efficiency, reference bands, plots and report.html.")
    p.add_argument("runs", nargs="+", metavar="[SYSTEM=]RUN_DIR",
                   help="a JUBE run directory, its outpath (latest run) or a directory of outpaths; "
                        "SYSTEM= names the system (default: the table's System column)")
    p.add_argument("--out", required=True, type=Path, help="directory to write the comparison into")
    p.add_argument("--reference-system",
                   help="system the ratios are taken against (default: the first given)")
    p.add_argument("--references", type=Path, default=reference.DEFAULT_FILE,
                   help="reference figures with tolerance bands, YAML or CSV (default: the shipped file)")
    p.add_argument("--no-references", action="store_true", help="check no figure against a band")
    p.add_argument("--all-runs", action="store_true", help="every run of an outpath, not only its latest")
    p.add_argument("--tokens-per-parameter", type=float, default=Jobs.tokens_per_parameter,
                   help="LLM job: tokens per model parameter (default 20)")
    p.add_argument("--llm-tokens", type=float, help="LLM job: a fixed number of tokens instead")
    p.add_argument("--epochs", type=float, default=Jobs.epochs, help="image job: epochs (default 90)")
    p.add_argument("--images-per-epoch", type=int, default=IMAGENET_TRAIN_IMAGES,
                   help="image job: images per epoch (default: ImageNet's 1 281 167)")
    p.add_argument("--version", action=VersionAction)
    return p


def _reference_system(rows: pd.DataFrame, wanted: str | None) -> str:
    systems = list(dict.fromkeys(rows["system"]))
    if wanted is None:
        return systems[0]
    if wanted not in systems:
        raise CompareError(f"--reference-system {wanted}: no run of that system given ({' '.join(systems)})")
    return wanted


def _failed(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["status"] != "ok"][["system", "benchmark", "config", "nodes", "devices", "global_batch",
                                         "status", "error", "run_dir"]]


def compare(args: argparse.Namespace) -> int:
    rows = runs.load(args.runs, args.all_runs)
    runs.check_common_benchmark(rows)
    ref_system = _reference_system(rows, args.reference_system)
    refs = reference.load(args.references) if not args.no_references else reference.load_empty()
    jobs = Jobs(tokens_per_parameter=args.tokens_per_parameter, llm_tokens=args.llm_tokens,
                epochs=args.epochs, images_per_epoch=args.images_per_epoch)

    rows = figures.add_ratios(figures.mark_best(rows), ref_system)
    checks = reference.verdicts(rows, refs)
    rows["verdict"] = reference.row_verdicts(rows, checks)
    solutions = figures.time_and_energy_to_solution(rows, jobs)
    scaling = figures.scaling_efficiency(rows)
    failed = _failed(rows)

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    rows.to_csv(out / "comparison.csv", index=False)
    solutions.to_csv(out / "time_to_solution.csv", index=False)
    scaling.to_csv(out / "scaling.csv", index=False)
    checks.drop(columns="row").to_csv(out / "verdicts.csv", index=False)

    samples = pd.concat([power.samples(Path(d), f"{s} {b}") for d, s, b in
                         rows[["run_dir", "system", "benchmark"]].drop_duplicates().itertuples(index=False)],
                        ignore_index=True)
    pngs = (plots.bars(rows, refs, out) + plots.heatmaps(rows, out) + plots.power_timeline(samples, out)
            + plots.scaling(scaling, out))

    notes = [f"Ratios (x ref) are against {ref_system}: same configuration, global batch and node count.",
             report.WINDOW, report.ESTIMATE_NOTE]
    sections = [("Notes", notes)]
    for benchmark in dict.fromkeys(rows["benchmark"]):
        table = report.comparison_display(rows, benchmark)
        sol = solutions[solutions["benchmark"] == benchmark] if not solutions.empty else solutions
        sol_display = report.solution_display(sol) if not sol.empty else sol
        scal = report.plain_display(scaling[scaling["benchmark"] == benchmark])
        text = [f"# {benchmark}: comparison (reference system {ref_system})\n\n",
                *(n + "\n\n" for n in notes),
                report.markdown(table), "\n## Time and energy to solution\n\n",
                report.markdown(sol_display) if not sol.empty else "none\n",
                "\n## Scaling efficiency\n\n", report.markdown(scal) if not scal.empty else "no runs that "
                "differ only in device count\n"]
        (out / f"comparison_{benchmark}.md").write_text("".join(text))
        sections += [(f"{benchmark}: comparison", [table]),
                     (f"{benchmark}: time and energy to solution", [report.ESTIMATE_NOTE, sol_display]),
                     (f"{benchmark}: scaling efficiency", [scal if not scal.empty else
                                                           "no runs that differ only in device count"])]
    sections += [("Verdicts against reference bands", [report.plain_display(checks.drop(columns="row"))]),
                 ("Reference figures (published ones are not runs of this suite)",
                  [report.plain_display(refs[["system", "benchmark", "model", "global_batch", "devices",
                                              "figure", "value", "lower", "upper", "origin", "source"]])]),
                 ("Failed rows", [report.plain_display(failed)]),
                 ("Plots", pngs or ["no plots: no ok rows"])]
    (out / "report.html").write_text(report.html_page("caraml-compare: " + " vs ".join(
        dict.fromkeys(rows["system"])), sections))

    for row in failed.itertuples():
        print(f"failed row: {row.system} {row.benchmark} {row.config} batch {row.global_batch:g}: "
              f"{row.status} {row.error}".rstrip())
    below = checks[checks["verdict"] == "below"]
    for row in below.itertuples():
        print(f"BELOW BAND: {row.system} {row.config} batch {row.global_batch:g} {row.figure} "
              f"{row.measured:.4g} < {row.low:.4g} ({row.origin}: {row.source})")
    print(f"wrote {out}/comparison.csv, {len(pngs)} plots and {out}/report.html "
          f"({len(rows)} rows, {len(failed)} failed, {len(checks)} checks, {len(below)} below their band)")
    return BELOW_BAND if not below.empty else 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return compare(args)
    except CompareError as err:
        print(f"caraml-compare: error: {err}", file=sys.stderr)
        return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
