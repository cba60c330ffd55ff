"""The time-sliced as-run comparison's own noise, the cost of a driver
option and of a change: the FNO's plain loop against itself, or its
driver against itself, with the energy methods of each side given apart
(the first side's against the second's) and each side's code from a
commit of its own (`--commits`: the checkout's tree at that commit,
extracted into a temporary folder; the side starts there), by the same
time-sliced rounds as the peer scripts' (aux/perf/as_run.py), on the
first CPU-sized problem:

    .venv/bin/python aux/perf/as_run_self.py [--side plain|driver] [--energy-methods auto none]
        [--commits FIRST SECOND] [--rounds 6] [--iterations 600] [--slice 0.5] [--refusals N]

Prints every round (and why one was refused: a side stopped inside a
timed iteration, or an iteration longer than a turn), then the second
side's time per iteration over the first's (above 1 the first is faster)
by the mean, the figure a row reports, by the iteration median and by CPU
time: the median over the rounds that count with its 95 % interval
(caraml-compare's seeded bootstrap, as the peer scripts') and their range,
and the host's load. Too many refused rounds: it says it cannot conclude
and exits with status 3.
Where both sides are the same, the ratio's distance from 1x is what the
method itself cannot resolve. A benchmark, not a test: it judges nothing."""

from __future__ import annotations

import argparse
import os
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
    p.add_argument("--refusals", type=int, default=None,
                   help="refused rounds after which it stops, inconclusive (default: a quarter of --rounds)")
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
        def one_round(first_first: bool) -> as_run.Round:
            return as_run.time_sliced(*cmds, dict(os.environ), a.slice, first_first,
                                      kinds=(a.side, a.side), cwds=cwds)

        done = as_run.interleaved(a.rounds, one_round, a.refusals, names=("first", "second"))
    what = (f"the FNO's {a.side} loop against itself" if a.side == "plain" else
            f"the FNO driver, --energy-methods {a.energy_methods[0]} (first) and "
            f"{a.energy_methods[1]} (second)")
    if hashes:
        what += f", the code of {hashes[0][:12]} (first) and {hashes[1][:12]} (second)"
    print(f"# {what}, time-sliced rounds of {a.iterations} timed iterations, turns of {a.slice:g} s")
    stop = as_run.inconclusive(done, a.rounds)
    if stop:
        print(stop)
        return as_run.EXIT_INCONCLUSIVE
    s = as_run.summary(done)
    for kind, said in (("wall", "time per iteration by the mean"),
                       ("wall_by_median", "by the iteration median"), ("cpu", "CPU time per iteration")):
        ratios = s[f"ratio_{kind}"]
        print(f"second / first, {said}: median {s[f'ratio_{kind}_median']:.3f}x, 95 % interval "
              f"{as_run.interval_text(s[f'ratio_{kind}_median_ci95'])}, rounds "
              f"{min(ratios):.3f}-{max(ratios):.3f}")
    print(f"# {as_run.how(s | {'slice_s': a.slice, 'iterations': a.iterations})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
