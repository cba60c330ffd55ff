"""The time-sliced as-run comparison's own noise, the cost of a driver
option and of a change: the FNO's plain loop against itself, or its
driver against itself, with the energy methods of each side given apart
(the first side's against the second's) and each side's code from a
commit of its own (`--commits`: the checkout's tree at that commit,
extracted into a temporary folder; the side starts there), by the same
time-sliced rounds as the peer scripts' (aux/perf/as_run.py), on the
first CPU-sized problem:

    .venv/bin/python aux/perf/as_run_self.py [--side plain|driver] [--energy-methods auto none]
        [--commits FIRST SECOND] [--rounds 6] [--iterations 600] [--slice 0.5]

Prints every round's ratio (the second side's time per iteration over the
first's: above 1 the first is faster), their median with its 95 % interval
(caraml-compare's seeded bootstrap, as the peer scripts') and their range.
Where both sides are the same, the ratio's distance from 1x is what the
method itself cannot resolve. A benchmark, not a test: it judges nothing."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import as_run
import fno_peers


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--side", choices=["plain", "driver"], default="plain")
    p.add_argument("--energy-methods", nargs=2, default=["auto", "auto"],
                   metavar=("FIRST", "SECOND"), help="the driver's, for each side")
    p.add_argument("--commits", nargs=2, default=None, metavar=("FIRST", "SECOND"),
                   help="the driver's code for each side (default: the checkout as it is)")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--iterations", type=int, default=600)
    p.add_argument("--slice", type=float, default=0.5, help="seconds of each turn")
    a = p.parse_args()
    if a.commits and a.side != "driver":
        p.error("--commits compares the driver at two commits: it needs --side driver")
    return a


def checked_out(repo: Path, commit: str, into: Path) -> tuple[Path, str]:
    """The tree of `repo` at `commit`, extracted into `into`; (the folder,
    the commit's full hash)"""
    full = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--end-of-options",
                           f"{commit}^{{commit}}"], capture_output=True, text=True)
    if full.returncode:
        raise SystemExit(f"--commits: {commit!r} is no commit of {repo} "
                         f"({full.stderr.strip() or 'git rev-parse failed'})")
    into.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(repo), "archive", full.stdout.strip()],
                               stdout=subprocess.PIPE)
    tar = subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout,
                         capture_output=True, text=True)
    archive.stdout.close()
    if archive.wait() or tar.returncode:
        raise SystemExit(f"--commits: extracting {commit} into {into} failed "
                         f"({' '.join(tar.stderr.split()) or 'git archive failed'}); "
                         f"free space in the temporary folder ($TMPDIR) and run it again")
    return into, full.stdout.strip()


def main() -> int:
    a = parse()
    run = argparse.Namespace(problems=fno_peers.CPU_PROBLEMS[:1], batch_size=4, precision="fp32",
                             warmup=2, as_run_iterations=a.iterations)
    with tempfile.TemporaryDirectory() as work:
        cwds, hashes = (as_run.ROOT, as_run.ROOT), None
        if a.commits:
            cwds, hashes = zip(*(checked_out(as_run.ROOT, c, Path(work) / f"tree{i}")
                                 for i, c in enumerate(a.commits)))
        if a.side == "plain":
            cmds = [[sys.executable, fno_peers.__file__, "--plain", *fno_peers.plain_args(run)]] * 2
        else:
            cmds = [[sys.executable, *fno_peers.driver_args(run, "cpu", str(Path(work) / str(i)),
                                                            methods)]
                    for i, methods in enumerate(a.energy_methods)]
        ratios = []
        for r in range(a.rounds):
            first, second = as_run.time_sliced(*cmds, dict(os.environ), a.slice, r % 2 == 0,
                                               kinds=(a.side, a.side), cwds=cwds)
            ratios.append(second.median_s / first.median_s)
            print(f"# round {r + 1}/{a.rounds}: first {first.median_s:.5f} s, second "
                  f"{second.median_s:.5f} s per iteration, second / first {ratios[-1]:.3f}",
                  flush=True)
    low, high = as_run.median_interval(ratios)
    what = (f"the FNO's {a.side} loop against itself" if a.side == "plain" else
            f"the FNO driver, --energy-methods {a.energy_methods[0]} (first) and "
            f"{a.energy_methods[1]} (second)")
    if hashes:
        what += f", the code of {hashes[0][:12]} (first) and {hashes[1][:12]} (second)"
    print(f"# {what}, {a.rounds} time-sliced rounds of {a.iterations} timed iterations, "
          f"turns of {a.slice:g} s")
    print(f"second / first: median {statistics.median(ratios):.3f}x, 95 % interval "
          f"{low:.3f}-{high:.3f}, rounds {min(ratios):.3f}-{max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
