"""caraml-compare RUN_DIR... --out DIR: JUBE runs of several systems side by
side, from the rows of their work packages (docs/compare.md): the options,
then the comparison computed (caraml/compare/comparison.py) and written
(caraml/compare/output.py).
Exit status 0; 1 when a system has a benchmark with no measured row (the
report is still written, with its failure); 2 on bad input or nothing to compare (one line
on stderr); 3 when a figure falls below its reference band; 4 when a system's
latest figure dropped below its own earlier runs (3 wins over 4, 4 over 1).

What it prints goes through the standard `logging` module (logger
"caraml.compare", on stdout): an alert (DROP, BELOW BAND, a failed
benchmark) at WARNING, every other line at INFO, and what it read and how
long each part took at DEBUG; -q shows the alerts alone, -v the details
too, CARAML_LOG_LEVEL sets the level without them."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from caraml.benchmarks import UnknownBenchmark
from caraml.compare import CompareError, comparison, jobs, output, reference, trend
from caraml.compare.comparison import BAD_INPUT, BELOW_BAND, DROPPED
from caraml.compare.jobs import Jobs
from jpwr.notice import add_level_options, chosen_level, level_kept
from jpwr.version import VersionAction

LOG = logging.getLogger("caraml.compare")
LEVEL_ENV = ("CARAML_LOG_LEVEL",)
# the lines that say something is wrong: shown at every level but -q's errors alone
ALERTS = ("DROP:", "BELOW BAND:", "failed benchmark:", "REFUSED:")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="caraml-compare",
        description="Compare JUBE runs of this suite's benchmarks from several systems: tables, time and "
                    "energy to solution, scaling efficiency, reference bands, plots and report.html.")
    p.add_argument("runs", nargs="*", metavar="[SYSTEM=]RUN_DIR",
                   help="a JUBE run directory, its outpath (latest run), a directory of outpaths or a bundle "
                        "(caraml-bundle); SYSTEM= names the system (default: the name in its row.json)")
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
    p.add_argument("--check-history", type=Path, metavar="DB",
                   help="check each system's figure against its own earlier runs of the same configuration "
                        "in this results history (results/caraml_rows.sqlite): a drop beyond their spread "
                        "is named on the first screen, exit status 4")
    p.add_argument("--all-runs", action="store_true", help="every run of an outpath, not only its latest")
    p.add_argument("--accept-unaudited", action="store_true",
                   help="rank rows without raw evidence (older runs, rows written by hand) too, each "
                        "sentence saying so; by default only audited rows rank (docs/run_rules.md)")
    jobs.add_options(p)
    add_level_options(p, LEVEL_ENV)
    p.add_argument("--version", action=VersionAction)
    return p


def _say(line: str) -> None:
    LOG.log(logging.WARNING if line.startswith(ALERTS) else logging.INFO, line)


def _stdout_logging(level: int) -> None:
    """The command's lines on stdout as they were, at the level asked for."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    LOG.handlers[:] = [handler]
    LOG.propagate = False
    LOG.setLevel(level)


def draw_history(args: argparse.Namespace) -> int:
    """--history: exit 3 when a series' latest point is below its reference
    band, else 4 when it dropped below the series' earlier runs."""
    refs = reference.load(args.references) if not args.no_references else reference.load_empty()
    found = trend.find(args.history, refs)
    output.write_history(found, args.out)
    for line in found.below:
        _say(f"BELOW BAND: {line}")
    for line in found.drops:
        _say(f"DROP: {line}")
    status = BELOW_BAND if found.ending_below else DROPPED if found.ending_dropped else 0
    _say(f"wrote {args.out}/history.html ({len(found.below)} points below their band, "
          f"{found.ending_below} series ending below it; {len(found.drops)} drops run to run, "
          f"{found.ending_dropped} series ending in one); exit status {status}")
    return status


def compare(args: argparse.Namespace) -> int:
    if args.history is not None:
        if args.runs:
            raise CompareError("give run directories or --history, not both")
        return draw_history(args)
    if not args.runs:
        raise CompareError("no run directory given; give [SYSTEM=]RUN_DIR... or --history DB")
    refs = reference.load(args.references) if not args.no_references else reference.load_empty()
    LOG.debug("references: %s", "none (--no-references)" if args.no_references else
              f"{len(refs)} from {args.references}")
    started, cpu = time.perf_counter(), time.process_time()
    computed = comparison.compute(args.runs, all_runs=args.all_runs, reference_system=args.reference_system,
                                  refs=refs, prices_file=args.prices, jobs=Jobs.of(args),
                                  history=trend.load(args.check_history) if args.check_history else None,
                                  accept_unaudited=args.accept_unaudited)
    LOG.debug("computed: %d rows of %d systems against %s in %.2f s (%.2f s CPU)", len(computed.every),
              computed.every["system"].nunique() if not computed.every.empty else 0,
              computed.reference_system, time.perf_counter() - started, time.process_time() - cpu)
    started, cpu = time.perf_counter(), time.process_time()
    charts = output.write(computed, args.out)
    LOG.debug("written: %s with %d plots in %.2f s (%.2f s CPU in this process)", args.out, charts,
              time.perf_counter() - started, time.process_time() - cpu)
    for line in output.lines(computed, args.out, charts):
        _say(line)
    return computed.status


def main(argv: list[str] | None = None) -> int:
    try:
        # the parser reads the benchmark table too (each job's options)
        args = build_parser().parse_args(argv)
        try:
            level = chosen_level(args.quiet, args.verbose, variables=LEVEL_ENV)
        except ValueError as err:
            raise CompareError(str(err)) from None
        with level_kept(LOG):
            _stdout_logging(level)
            return compare(args)
    except (CompareError, UnknownBenchmark) as err:  # the latter: a site's CARAML_BENCHMARKS
        print(f"caraml-compare: error: {err}", file=sys.stderr)
        return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
