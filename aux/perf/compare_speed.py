"""How long `caraml-compare` takes for many systems and runs, in CPU
seconds beside wall seconds: writes --systems systems with --runs runs in
all (two configurations each, power samples in one configuration of every
run) as row.json files, then runs the comparison over them with --all-runs
(the runs of one system are repeats of its two configurations, each ranked
on their median with an interval on every margin), --repeats
times per size. Several sizes show how the time grows with the runs; the
CPU seconds (the command's and every process it waited for, its drawing
processes included) are the figure that load on a shared host cannot
inflate much, the wall seconds are what a user waits. Run from the
repository root:

    .venv/bin/python aux/perf/compare_speed.py [--systems 12] [--runs 25 50 100] [--repeats 3] \
        [--tree DIR ...] [--json FILE]

--tree runs the comparison of another checkout (e.g. an older commit
unpacked by `git archive COMMIT | tar -x -C DIR`) as well, alternately
with this one in each repeat, so that both see the same load. The figures
and the command that produced them are recorded in docs/results.md. This
is a benchmark, not a test: it prints numbers and judges nothing."""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tests.compare

from tests.compare import rowfixtures as fx

ROOT = Path(__file__).resolve().parents[2]


def write_runs(root: Path, systems: int, runs: int) -> list[str]:
    """runs runs spread over systems systems as evenly as they go; the [SYSTEM=]PATH arguments."""
    args = []
    for s in range(systems):
        name = f"S{s + 1:02d}"
        for r in range(runs // systems + (1 if s < runs % systems else 0)):
            rows = [fx.a100(per_s_per_device=15000.0 + 700 * s + 10 * r, global_batch=256),
                    fx.a100(per_s_per_device=16000.0 + 700 * s + 10 * r, global_batch=512)]
            fx.write_run(root / name, "llm_run", rows, run_id=r, power={1: fx.samples(devices=4, seconds=60)})
        args.append(f"{name}={root / name / 'llm_run'}")
    return args


def _children_cpu_s() -> float:
    """CPU seconds of the processes this one has waited for (and theirs, once waited for)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _command(tree: Path) -> list[str]:
    """The checkout's caraml-compare; rows written by hand are unaudited, so ranked where accepted
    (as a committee's are not), where the checkout audits at all."""
    command = [sys.executable, "-m", "caraml.compare.cli"]
    usage = subprocess.run([*command, "--help"], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                           text=True, capture_output=True, timeout=300).stdout
    return command + (["--accept-unaudited"] if "--accept-unaudited" in usage else [])


def time_one(tree: Path, arguments: list[str], out: Path) -> dict:
    """One comparison by the checkout tree: its wall and CPU seconds, the load before and after."""
    command = [*_command(tree), *arguments, "--all-runs", "--out", str(out), "--no-references"]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    load_before = os.getloadavg()[0]
    start, cpu_before = time.monotonic(), _children_cpu_s()
    proc = subprocess.run(command, cwd=tree, env=env, text=True, capture_output=True, timeout=900)
    seconds, cpu = time.monotonic() - start, _children_cpu_s() - cpu_before
    if proc.returncode != 0:
        sys.exit(f"compare_speed: caraml-compare of {tree} exited {proc.returncode}: {proc.stderr.strip()}")
    return {"wall_s": seconds, "cpu_s": cpu, "load_before": load_before, "load_after": os.getloadavg()[0],
            "plots": len(list(out.glob("*.png")))}


def _median(found: list[dict], key: str) -> float:
    return statistics.median(t[key] for t in found)


def _each(found: list[dict], shape: str) -> str:
    return " ".join(shape.format(**t) for t in found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=12)
    parser.add_argument("--runs", type=int, nargs="+", default=[100],
                        help="runs in all, spread over the systems; several sizes show the growth")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="another checkout to time alternately with this one (repeatable)")
    parser.add_argument("--json", type=Path, help="write every timing here as well")
    args = parser.parse_args()
    trees = [ROOT, *(t.resolve() for t in args.tree)]
    timings: dict[str, dict[int, list[dict]]] = {str(t): {} for t in trees}
    print(f"caraml-compare, {args.systems} systems, {os.cpu_count()} CPUs, load average at the start "
          f"{os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        for runs in args.runs:
            root = Path(tmp) / f"runs{runs}"
            arguments = write_runs(root, args.systems, runs)
            for repeat in range(args.repeats):
                for number, tree in enumerate(trees):
                    timings[str(tree)].setdefault(runs, []).append(
                        time_one(tree, arguments, root / f"out{repeat}_{number}"))
            for tree in trees:
                found = timings[str(tree)][runs]
                print(f"{tree}: {runs} runs ({2 * runs} rows, {found[0]['plots']} plots): median "
                      f"{_median(found, 'wall_s'):.1f} wall-s, {_median(found, 'cpu_s'):.1f} CPU-s "
                      f"(least {min(t['cpu_s'] for t in found):.1f}) of "
                      f"{args.repeats} (wall {_each(found, '{wall_s:.1f}')}; "
                      f"CPU {_each(found, '{cpu_s:.1f}')}; "
                      f"load {_each(found, '{load_before:.1f}-{load_after:.1f}')})")
    for tree in trees:
        by_size = timings[str(tree)]
        sizes = sorted(by_size)
        # CPU seconds per run added, from one size to the next: equal steps are linear growth. The
        # least of the repeats is the one a busy host inflated least (shared caches, hyperthreads)
        for name, pick in (("median", lambda found: _median(found, "cpu_s")),
                           ("least", lambda found: min(t["cpu_s"] for t in found))):
            steps = [(pick(by_size[b]) - pick(by_size[a])) / (b - a) for a, b in zip(sizes, sizes[1:])]
            if steps:
                print(f"{tree}: CPU-s per run added ({name} of the repeats), " + ", ".join(
                    f"{a} to {b} runs {s:.3f}" for (a, b), s in zip(zip(sizes, sizes[1:]), steps)))
    if args.json:
        args.json.write_text(json.dumps({"systems": args.systems, "cpus": os.cpu_count(),
                                         "timings": timings}, indent=1) + "\n")


if __name__ == "__main__":
    main()
