"""How long `caraml-compare` takes for many systems and runs: writes
--systems systems with --runs runs in all (two configurations each, power
samples in every run, so that every run gets its power timeline) as row.json
files, then times the installed command over them with --all-runs: the runs
of one system are repeats of its two configurations, each ranked on their
median with an interval on every margin. Run from
the repository root:

    .venv/bin/python aux/perf/compare_speed.py [--systems 12] [--runs 100] [--repeats 3]

The figure and the command that produced it are recorded in docs/compare.md.
This is a benchmark, not a test: it prints numbers and judges nothing."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tests.compare

from tests.compare import rowfixtures as fx

COMMAND = Path(sys.executable).parent / "caraml-compare"


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=12)
    parser.add_argument("--runs", type=int, default=100, help="runs in all, spread over the systems")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        arguments = write_runs(root / "runs", args.systems, args.runs)
        seconds = []
        for repeat in range(args.repeats):
            out = root / f"out{repeat}"
            start = time.perf_counter()
            # rows written by hand are unaudited: ranked where accepted, as a committee's are not
            command = [str(COMMAND), *arguments, "--all-runs", "--accept-unaudited", "--out", str(out),
                       "--no-references"]
            proc = subprocess.run(command, text=True, capture_output=True, timeout=600)
            seconds.append(time.perf_counter() - start)
            if proc.returncode != 0:
                sys.exit(f"compare_speed: caraml-compare exited {proc.returncode}: {proc.stderr.strip()}")
        plots = len(list((root / "out0").glob("*.png")))
    print(f"caraml-compare, {args.systems} systems, {args.runs} runs ({2 * args.runs} rows, {plots} plots), "
          f"{os.cpu_count()} CPUs: median {statistics.median(seconds):.1f} s of {args.repeats} "
          f"({' '.join(f'{s:.1f}' for s in seconds)})")


if __name__ == "__main__":
    main()
