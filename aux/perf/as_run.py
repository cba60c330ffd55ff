"""A benchmark as it runs, against a plain loop over the same network,
optimizer and batches. The suite's side is its driver started as JUBE
starts it (`python -m <driver>` with the job's arguments: its data source,
loop, timing, stop condition and jpwr); the plain side is a loop of a few
lines in a process of its own (the peer script with `--plain`), which
takes its batches from memory and times its iterations the way the
driver does (the device synchronised before each clock read). The two run
by turns, the order swapped every round, with the same environment, so a
clock change or another job on the host hits both alike.

Each run gives its median time per timed iteration and its process's CPU
time per iteration (all its threads, not a loader's worker processes);
a round's ratio is the plain loop's time over the suite's (above 1: the
suite is faster), summarised as the median with its 95 % interval and
the best round. The interval comes from the seeded bootstrap
caraml-compare uses for repeats (caraml/compare/repeats.py), drawing whole
rounds so that each keeps its pair: on a shared host one run can be 10 to
30 % slower than the next, and the interval says whether the rounds
resolve a 2 % target. Beside them, the plain loop's fastest run over the
suite's: interference only ever adds time, so each side's fastest run is
its least disturbed."""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from caraml.compare import repeats  # noqa: E402

PLAIN_LINE = "as-run plain:"
RUN_TIMEOUT_S = 3600


@dataclass(frozen=True)
class Run:
    median_s: float  # median time per timed iteration
    cpu_s: float  # process CPU time per timed iteration


class RunFailed(RuntimeError):
    pass


def checked(cmd: Sequence[str], env: dict[str, str], what: str) -> str:
    proc = subprocess.run(list(cmd), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise RunFailed(f"{what} ended with status {proc.returncode}: {tail}")
    return proc.stdout


def suite_run(driver_args: Sequence[str], env: dict[str, str]) -> Run:
    """The driver's own figures from its global line"""
    out = checked([sys.executable, *driver_args], env, f"the driver ({driver_args[1]})")
    fields = next((dict(kv.split("=", 1) for kv in line.split(": ", 1)[1].split())
                   for line in reversed(out.splitlines()) if line.startswith("CARAML global: ")),
                  None)
    if fields is None or fields.get("time_per_iteration_median_s") in (None, "-"):
        raise RunFailed("the driver printed no timed figure")
    return Run(float(fields["time_per_iteration_median_s"]), float(fields["cpu_s_per_iteration"]))


def plain_run(script: Path, plain_args: Sequence[str], env: dict[str, str]) -> Run:
    """The peer script's plain loop in a process of its own"""
    out = checked([sys.executable, str(script), "--plain", *plain_args], env, "the plain loop")
    line = next(line for line in reversed(out.splitlines()) if line.startswith(PLAIN_LINE))
    return Run(**json.loads(line[len(PLAIN_LINE):]))


def time_plain(step: Callable[[], object], warmup: int, iterations: int,
               sync: Callable[[], None]) -> Run:
    """The plain loop's side, in its process: `warmup` untimed steps, then
    `iterations` timed ones; printed for plain_run to read."""
    for _ in range(warmup):
        step()
    sync()
    times, cpu0 = [], time.process_time()
    for _ in range(iterations):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    run = Run(statistics.median(times), (time.process_time() - cpu0) / iterations)
    print(PLAIN_LINE + json.dumps(asdict(run)), flush=True)
    return run


def interleaved(rounds: int, suite: Callable[[], Run], plain: Callable[[], Run],
                say: Callable[[str], None] = print) -> dict[str, list[Run]]:
    runs: dict[str, list[Run]] = {"suite": [], "plain": []}
    sides = {"suite": suite, "plain": plain}
    for r in range(rounds):
        for name in (("suite", "plain") if r % 2 == 0 else ("plain", "suite")):
            runs[name].append(sides[name]())
        say(f"# round {r + 1}/{rounds}: suite {runs['suite'][-1].median_s:.4f} s, "
            f"plain {runs['plain'][-1].median_s:.4f} s per iteration")
    return runs


def median_interval(ratios: Sequence[float]) -> tuple[float, float]:
    """The 95 % interval of the rounds' median ratio: whole rounds drawn
    with replacement, with the seed, resamples and percentiles of a
    comparison's repeats; (nan, nan) for a single round."""
    if len(ratios) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(repeats.SEED)
    picks = rng.integers(0, len(ratios), (repeats.RESAMPLES, len(ratios)))
    low, high, _ = repeats.bounds(np.median(np.asarray(ratios)[picks], axis=1))
    return low, high


def summary(runs: dict[str, list[Run]]) -> dict:
    """Per round the plain loop's time over the suite's (wall and CPU), and
    their median, its 95 % interval and the best over the rounds; and the
    fastest runs' ratio"""
    wall = [p.median_s / s.median_s for s, p in zip(runs["suite"], runs["plain"])]
    cpu = [p.cpu_s / s.cpu_s for s, p in zip(runs["suite"], runs["plain"])]
    return {
        "rounds": {name: [asdict(r) for r in rs] for name, rs in runs.items()},
        "ratio_wall": wall, "ratio_cpu": cpu,
        "ratio_wall_median": statistics.median(wall),
        "ratio_wall_median_ci95": median_interval(wall), "ratio_wall_best": max(wall),
        "ratio_wall_fastest": (min(r.median_s for r in runs["plain"])
                               / min(r.median_s for r in runs["suite"])),
        "ratio_cpu_median": statistics.median(cpu),
        "suite_median_s": statistics.median(r.median_s for r in runs["suite"]),
        "plain_median_s": statistics.median(r.median_s for r in runs["plain"]),
        "suite_cpu_s": statistics.median(r.cpu_s for r in runs["suite"]),
        "plain_cpu_s": statistics.median(r.cpu_s for r in runs["plain"]),
    }


COLUMNS = ["as run", "suite s/iteration", "plain s/iteration", "plain / suite (median)",
           "95 % interval", "plain / suite (best)", "fastest runs", "suite CPU s/iteration",
           "plain CPU s/iteration", "plain / suite (CPU)"]


def row(name: str, s: dict) -> list[str]:
    return [name, f"{s['suite_median_s']:.4f}", f"{s['plain_median_s']:.4f}",
            f"{s['ratio_wall_median']:.3f}x",
            "{:.3f}-{:.3f}".format(*s["ratio_wall_median_ci95"]), f"{s['ratio_wall_best']:.3f}x",
            f"{s['ratio_wall_fastest']:.3f}x",
            f"{s['suite_cpu_s']:.4f}", f"{s['plain_cpu_s']:.4f}", f"{s['ratio_cpu_median']:.3f}x"]


def add_arguments(p: argparse.ArgumentParser, warmup: int, iterations: int = 20) -> None:
    """The options every peer script takes: rounds and warm-up of the step
    alone, the as-run comparison's runs and iterations (a benchmark whose
    iterations take milliseconds asks for more, so that a run lasts long
    enough not to be decided by the host's state at one instant), and the
    worker mode."""
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=warmup, help="untimed rounds (step alone) or steps (as run)")
    p.add_argument("--as-run-iterations", type=int, default=iterations,
                   help="timed iterations of each run of the driver and of the plain loop")
    p.add_argument("--as-run-rounds", type=int, default=15,
                   help="runs of the driver and of the plain loop, each (0: the step alone)")
    p.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
