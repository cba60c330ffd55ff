"""How often caraml-compare's 95 % interval on a ratio holds the truth
between two systems that are the same, with few runs a side: simulates
runs of two equal systems (each run's speed off by run-to-run noise, each
of its timed iterations off by iteration noise, its row's p10 and p90 of
the iteration time taken from them), makes each system's line as
caraml/compare/repeats.py's collapse does (the runs' figures, the median
and the median run's iteration spread) and asks the suite's own
repeats.interval and repeats.runs_to_separate. Prints per noise model and
runs a side: the coverage (intervals that hold 1), how often there is no
interval, how often a sentence would name a winner (interval without 1 and
a lead beyond the tie margin), the median interval's half-width, and how
often a true 5 % lead is separated (and where not, the median of the runs
a side the sentence says would separate it). Run from the repository root:

    .venv/bin/python aux/perf/interval_coverage.py [--trials 10000] [--seed 1]

The figures and the command that produced them are recorded in
docs/compare.md ("Repeats and confidence intervals"). This is a
benchmark, not a test: it prints numbers and judges nothing."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from caraml.compare import intervals, repeats

ITERATIONS = 50  # timed iterations a run
ITERATION_NOISE = 0.03  # a timed iteration's spread (log sd) about its run's mean
RUNS = [(2, 2), (3, 3), (5, 5), (2, 3), (2, 5), (5, 2), (3, 1), (1, 3), (2, 1), (1, 5), (1, 1)]
LEAD = 1.05  # the true lead whose separation the last column counts


def _lognormal(sd: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda rng, n: rng.normal(0.0, sd, n)


def _student3(sd: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    # Student's t with 3 degrees of freedom has variance 3: scaled to sd
    return lambda rng, n: rng.standard_t(3, n) * sd / math.sqrt(3)


def _slow_runs(sd: float, share: float, slower: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    """Lognormal noise, and a share of the runs slower by a factor (a busy file system, a hot device)."""
    return lambda rng, n: rng.normal(0.0, sd, n) - np.where(rng.random(n) < share, math.log(slower), 0.0)


# each run's log speed about its system's: the noise models simulated
MODELS = {
    "lognormal 1 %": _lognormal(0.01),
    "lognormal 3 %": _lognormal(0.03),
    "Student t3, sd 3 %": _student3(0.03),
    "lognormal 1 %, 1 in 10 runs 10 % slow": _slow_runs(0.01, 0.1, 1.10),
}


def line(rng: np.random.Generator, system: str, runs: int, noise: Callable, speed: float = 1.0) -> dict:
    """One system's line of runs runs, as repeats.collapse gives it."""
    rates, rows = [], []
    for run_speed in speed * np.exp(noise(rng, runs)):
        times = np.exp(rng.normal(0.0, ITERATION_NOISE, ITERATIONS)) / run_speed
        p10, p90 = np.percentile(times, [10, 90])
        rates.append(1 / times.mean())
        rows.append({"timed_iterations": ITERATIONS, "time_per_iteration_s": times.mean(),
                     "time_per_iteration_p10_s": p10, "time_per_iteration_p90_s": p90})
    # the run at the median (the lower one of an even count) stands for the others' words
    middle = int(np.argsort(rates, kind="stable")[(runs - 1) // 2])
    return {**rows[middle], "system": system, "runs": runs, "per_s": float(np.median(rates)),
            "per_s_runs": tuple(rates)}


def measure(rng: np.random.Generator, noise: Callable, runs: tuple[int, int], trials: int) -> dict:
    held = none = winner = separated = 0
    halves, needed = [], []
    for _ in range(trials):
        top, bottom = line(rng, "A", runs[0], noise), line(rng, "B", runs[1], noise)
        low, high, _ = repeats.interval(top, bottom, "per_s")
        if math.isnan(low):
            none += 1
        else:
            held += low <= 1 <= high
            ratio = top["per_s"] / bottom["per_s"]
            winner += bool(repeats.significant(low, high)) and not intervals.tie(ratio)
            halves.append(math.log(high / low) / 2)
        # a system that is LEAD times as fast: separated, or how many runs would separate its lead
        faster, slower = line(rng, "A", runs[0], noise, LEAD), line(rng, "B", runs[1], noise)
        low, high, _ = repeats.interval(faster, slower, "per_s")
        separated += not math.isnan(low) and low > 1
        ratio = faster["per_s"] / slower["per_s"]
        if not math.isnan(low) and low <= 1 <= high and not intervals.tie(ratio):
            needed.append(repeats.runs_to_separate(faster, slower, "per_s", ratio) or intervals.MOST_RUNS)
    given = trials - none
    return {"coverage": _share(held, given), "no interval": _share(none, trials),
            "names a winner": _share(winner, given),
            "median half-width": f"{100 * math.expm1(float(np.median(halves))):.1f} %" if halves else "n/a",
            f"{_percent(LEAD - 1)} lead separated": _share(separated, trials),
            "else: runs a side to separate it (median)": f"{np.median(needed):.0f}" if needed else "n/a"}


def _percent(share: float) -> str:
    return f"{100 * share:.0f} %"


def _share(count: int, of: int) -> str:
    return f"{100 * count / of:.1f} %" if of else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10000, help="simulated comparisons per cell")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{args.trials} trials a cell, seed {args.seed}, {ITERATIONS} timed iterations a run with "
          f"{_percent(ITERATION_NOISE)} iteration noise; tie margin {_percent(intervals.TIE_MARGIN)}")
    for name, noise in MODELS.items():
        table = {f"{a} v {b}": measure(rng, noise, (a, b), args.trials) for a, b in RUNS}
        columns = list(next(iter(table.values())))
        print(f"\n{name}\n\n| runs | {' | '.join(columns)} |\n|{' --- |' * (len(columns) + 1)}")
        for runs, cells in table.items():
            print(f"| {runs} | {' | '.join(cells.values())} |")


if __name__ == "__main__":
    main()
