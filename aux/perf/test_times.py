"""How long the test suite takes, folder by folder: runs pytest once per
folder of tests/ (and once for the test files directly in tests/), each in
its own process as `bash aux/run_tests.sh FOLDER` would, and prints the wall
time, the CPU time of pytest and the processes it waited for (not the jobs
that Slurm's daemons run), the outcome counts and the load average before
and after each. The CPU time grows far less than the wall time on a busy
host. Run from the repository root, with the suite's environment set up:

    .venv/bin/python aux/perf/test_times.py [--only e2e regression] [--out times.json]

The figures and the command that produced them are recorded in
docs/results.md. This is a benchmark, not a test: it prints numbers and
judges nothing (a folder that fails is timed all the same)."""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
# pytest's last line: "12 passed, 1 skipped in 3.40s"
OUTCOMES = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)")


def targets(only: list[str]) -> list[tuple[str, list[str]]]:
    """(name, pytest arguments) per folder of tests/, and the files directly in tests/."""
    folders = sorted(p.name for p in TESTS.iterdir()
                     if p.is_dir() and not p.name.startswith((".", "_")) and any(p.rglob("test_*.py")))
    found = [(name, [str(TESTS / name)]) for name in folders]
    top = sorted(str(p) for p in TESTS.glob("test_*.py"))
    if top:
        found.append(("tests/*.py", top))
    if only:
        unknown = set(only) - {name for name, _ in found}
        if unknown:
            raise SystemExit(f"test_times: no test folder {', '.join(sorted(unknown))}; "
                             f"folders: {', '.join(name for name, _ in found)}")
        found = [(name, args) for name, args in found if name in only]
    return found


def _children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def time_one(args: list[str]) -> dict:
    load_before = os.getloadavg()[0]
    start, cpu_before = time.monotonic(), _children_cpu_s()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, capture_output=True, text=True)
    seconds = time.monotonic() - start
    last = (done.stdout.strip().splitlines() or [""])[-1]
    counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
              for n, kind in OUTCOMES.findall(last)}
    return {"seconds": round(seconds, 1), "cpu_seconds": round(_children_cpu_s() - cpu_before, 1),
            "exit": done.returncode, "outcomes": counts,
            "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:02.0f} s"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=[], metavar="FOLDER",
                    help="time only these folders of tests/ (default: all)")
    ap.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = ap.parse_args(argv)
    times = {}
    print("| folder | wall time | CPU time | passed | failed | skipped | load before / after |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, pytest_args in targets(args.only):
        t = times[name] = time_one(pytest_args)
        o = t["outcomes"]
        print(f"| {name} | {_clock(t['seconds'])} | {_clock(t['cpu_seconds'])} | {o.get('passed', 0)} | "
              f"{o.get('failed', 0) + o.get('error', 0)} | {o.get('skipped', 0)} | "
              f"{t['load_before']} / {t['load_after']} |", flush=True)
    total = sum(t["seconds"] for t in times.values())
    cpu = sum(t["cpu_seconds"] for t in times.values())
    print(f"| all of these | {_clock(total)} | {_clock(cpu)} | | | | |")
    if args.out:
        args.out.write_text(json.dumps(times, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
