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
its least disturbed.

On a CPU host the two sides run time-sliced by default (`--as-run-slice`):
both processes are started, each is paused (SIGSTOP, its whole process
group) when it reaches its loop, and from then on they take turns of a
few seconds until both have ended, one always paused while the other
runs. A host whose speed drifts over tens of seconds (a virtual machine
beside others) then slows both sides alike within each pair of turns, as
it cannot between whole runs a minute apart. A pause falls inside at most
one timed iteration per turn; each run records its pauses, and a turn
spans many iterations, so the medians compare like with like. On a GPU
the runs go whole by turns (`--as-run-slice 0`): two processes would hold
the device's memory at once, and work queued before a pause would run in
the other's turn."""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from caraml.compare import repeats  # noqa: E402

PLAIN_LINE = "as-run plain:"
# where each side's loop begins: the driver's provenance line comes just
# before its loop (caraml/node/driver.py train_loop), the plain loop's own
# line before its warm-up
SUITE_READY = "CARAML provenance:"
PLAIN_READY = "as-run plain ready"
RUN_TIMEOUT_S = 3600
STOPPED_WITHIN_S = 10.0  # a paused process group's threads have all stopped


@dataclass(frozen=True)
class Run:
    median_s: float  # median time per timed iteration
    cpu_s: float  # process CPU time per timed iteration
    pauses: int = 0  # turns that ended inside its loop (time-sliced runs)


class RunFailed(RuntimeError):
    pass


def _failed(what: str, status: int, output: str) -> RunFailed:
    tail = " | ".join(output.strip().splitlines()[-3:])
    return RunFailed(f"{what} ended with status {status}: {tail}")


def checked(cmd: Sequence[str], env: dict[str, str], what: str) -> str:
    proc = subprocess.run(list(cmd), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    if proc.returncode != 0:
        raise _failed(what, proc.returncode, proc.stderr or proc.stdout)
    return proc.stdout


def driver_figures(out: str) -> Run:
    """The driver's own figures from its last global line"""
    fields = next((dict(kv.split("=", 1) for kv in line.split(": ", 1)[1].split())
                   for line in reversed(out.splitlines()) if line.startswith("CARAML global: ")),
                  None)
    if fields is None or fields.get("time_per_iteration_median_s") in (None, "-"):
        raise RunFailed("the driver printed no timed figure")
    return Run(float(fields["time_per_iteration_median_s"]), float(fields["cpu_s_per_iteration"]))


def plain_figures(out: str) -> Run:
    line = next((line for line in reversed(out.splitlines()) if line.startswith(PLAIN_LINE)),
                None)
    if line is None:
        raise RunFailed("the plain loop printed no timed figure")
    return Run(**json.loads(line[len(PLAIN_LINE):]))


def suite_run(driver_args: Sequence[str], env: dict[str, str]) -> Run:
    return driver_figures(checked([sys.executable, *driver_args], env,
                                  f"the driver ({driver_args[1]})"))


def plain_run(script: Path, plain_args: Sequence[str], env: dict[str, str]) -> Run:
    """The peer script's plain loop in a process of its own"""
    return plain_figures(checked([sys.executable, str(script), "--plain", *plain_args], env,
                                 "the plain loop"))


def time_plain(step: Callable[[], object], warmup: int, iterations: int,
               sync: Callable[[], None]) -> Run:
    """The plain loop's side, in its process: `warmup` untimed steps, then
    `iterations` timed ones; printed for plain_run to read."""
    print(PLAIN_READY, flush=True)
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


def by_turns(suite: Callable[[], Run], plain: Callable[[], Run]) -> Callable[[bool], tuple[Run, Run]]:
    """A round of whole runs, one after the other"""

    def one_round(suite_first: bool) -> tuple[Run, Run]:
        if suite_first:
            s = suite()
            return s, plain()
        p = plain()
        return suite(), p

    return one_round


def interleaved(rounds: int, one_round: Callable[[bool], tuple[Run, Run]],
                say: Callable[[str], None] = print) -> dict[str, list[Run]]:
    """`rounds` rounds, the suite's side first in every other one"""
    runs: dict[str, list[Run]] = {"suite": [], "plain": []}
    for r in range(rounds):
        s, p = one_round(r % 2 == 0)
        runs["suite"].append(s)
        runs["plain"].append(p)
        say(f"# round {r + 1}/{rounds}: suite {s.median_s:.4f} s, "
            f"plain {p.median_s:.4f} s per iteration")
    return runs


def _die_with_parent() -> None:
    """In a side's process before it starts: killed with the comparison,
    so that no paused side outlives it (PR_SET_PDEATHSIG)"""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def _stopped(pgid: int) -> bool:
    """Whether every thread of every process in the group has stopped (or
    ended)"""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            states = [(task / "stat").read_text().rsplit(")", 1)[1].split()[0]
                      for task in (proc / "task").iterdir()]
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue  # gone while read
        if any(state not in "TtZX" for state in states):
            return False
    return True


class _Side:
    """One side of a time-sliced round: a process group of its own, its
    output as it comes, and whether it has reached its loop (where it is
    paused until the other side has too)"""

    def __init__(self, cmd: Sequence[str], env: dict[str, str], ready_line: str, what: str,
                 cwd: Path):
        self.what, self.ready_line, self.pauses = what, ready_line, 0
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                     preexec_fn=_die_with_parent)
        self.reader = threading.Thread(target=self._read, daemon=True)

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            if not self.ready.is_set() and line.startswith(self.ready_line):
                self.signal(signal.SIGSTOP)
                self.ready.set()
        self.ready.set()  # ended without reaching its loop: nothing more will come

    def running(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass  # the group has ended

    def hold(self, deadline: float) -> None:
        """Pauses the group and waits until all its threads have stopped"""
        self.signal(signal.SIGSTOP)
        while not _stopped(self.proc.pid):
            if time.monotonic() > deadline:
                raise RunFailed(f"{self.what} did not stop within {STOPPED_WITHIN_S:.0f} s of SIGSTOP")
            time.sleep(0.001)

    def check(self) -> None:
        if self.proc.returncode not in (None, 0):
            self.reader.join(timeout=5)
            raise _failed(self.what, self.proc.returncode, "".join(self.lines))

    def output(self) -> str:
        self.reader.join(timeout=5)
        return "".join(self.lines)


# a side's kind: where its loop begins, how its figures are read, its name
KINDS: dict[str, tuple[str, Callable[[str], Run], Callable[[Sequence[str]], str]]] = {
    "driver": (SUITE_READY, driver_figures, lambda cmd: f"the driver ({cmd[2]})"),
    "plain": (PLAIN_READY, plain_figures, lambda cmd: "the plain loop"),
}


def time_sliced(suite_cmd: Sequence[str], plain_cmd: Sequence[str], env: dict[str, str],
                slice_s: float, suite_first: bool, deadline_s: float = RUN_TIMEOUT_S,
                kinds: tuple[str, str] = ("driver", "plain"),
                cwds: tuple[Path, Path] = (ROOT, ROOT)) -> tuple[Run, Run]:
    """One round with both sides alive, taking turns of `slice_s` seconds
    from the moment both have reached their loops until both have ended;
    the side whose turn comes first alternates with `suite_first`. `kinds`
    name what each side is and `cwds` where each starts (a side against
    itself, or the checkout at another commit, for aux/perf/as_run_self.py)."""
    end = time.monotonic() + deadline_s
    ready, figures, names = zip(*(KINDS[kind] for kind in kinds))  # before any process starts
    sides: list[_Side] = []
    try:
        for cmd, line, name, cwd in zip((suite_cmd, plain_cmd), ready, names, cwds):
            sides.append(_Side(cmd, env, line, name(cmd), cwd))
        for side in sides:
            side.reader.start()
        for side in sides:
            if not side.ready.wait(max(0.0, end - time.monotonic())):
                raise RunFailed(f"{side.what} did not reach its loop within {deadline_s:.0f} s")
            side.proc.poll()
            side.check()
            side.hold(time.monotonic() + STOPPED_WITHIN_S)
        turns = sides if suite_first else sides[::-1]
        while any(side.running() for side in sides):
            for side in turns:
                if side.running():
                    _turn(side, [o for o in sides if o is not side][0], slice_s, end, deadline_s)
                side.check()
        return tuple(replace(read(side.output()), pauses=side.pauses)
                     for side, read in zip(sides, figures))
    finally:
        for side in sides:
            side.signal(signal.SIGKILL)
            side.proc.wait()


def _turn(side: _Side, other: _Side, slice_s: float, end: float, deadline_s: float) -> None:
    """`side` runs for a turn, or to its end where the other has ended"""
    side.signal(signal.SIGCONT)
    while True:
        left = end - time.monotonic()
        if left <= 0:
            raise RunFailed(f"{side.what} did not end within {deadline_s:.0f} s")
        try:
            side.proc.wait(timeout=min(slice_s, left))
            return
        except subprocess.TimeoutExpired:
            if other.running():
                side.hold(time.monotonic() + STOPPED_WITHIN_S)
                side.pauses += 1
                return


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


def add_arguments(p: argparse.ArgumentParser, warmup: int, iterations: int = 20,
                  slice_s: float = 4.0, rounds: int = 8) -> None:
    """The options every peer script takes: rounds and warm-up of the step
    alone, the as-run comparison's rounds (a benchmark whose rounds take
    seconds asks for more, so that the median's interval resolves 2 %),
    iterations (a benchmark whose iterations take milliseconds asks for
    more, so that a run spans many turns) and turns (`slice_s` on a CPU: a
    few dozen of its iterations, so that few hold a pause), and the worker
    mode."""
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=warmup, help="untimed rounds (step alone) or steps (as run)")
    p.add_argument("--as-run-iterations", type=int, default=iterations,
                   help="timed iterations of each run of the driver and of the plain loop")
    p.add_argument("--as-run-rounds", type=int, default=rounds,
                   help="runs of the driver and of the plain loop, each (0: the step alone)")
    p.add_argument("--as-run-slice", type=float, default=None,
                   help=f"seconds of each turn when both run time-sliced; 0: whole runs by turns "
                        f"(default: {slice_s:g} on a CPU, 0 on a GPU)")
    p.set_defaults(as_run_cpu_slice=slice_s)
    p.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)


def compare(a: argparse.Namespace, device: str, driver_args: Sequence[str], script: Path,
            plain_args: Sequence[str], env: dict[str, str]) -> dict:
    """The as-run comparison the options ask for: the driver (`python
    driver_args`) against the script's plain loop (`script --plain
    plain_args`), time-sliced or in whole runs by turns"""
    slice_s = a.as_run_slice if a.as_run_slice is not None else (
        a.as_run_cpu_slice if device == "cpu" else 0.0)
    suite_cmd = [sys.executable, *driver_args]
    plain_cmd = [sys.executable, str(script), "--plain", *plain_args]
    if slice_s > 0:
        def one_round(suite_first: bool) -> tuple[Run, Run]:
            return time_sliced(suite_cmd, plain_cmd, env, slice_s, suite_first)
    else:
        one_round = by_turns(lambda: suite_run(driver_args, env),
                             lambda: plain_run(script, plain_args, env))
    runs = interleaved(a.as_run_rounds, one_round)
    return {"driver_args": list(driver_args), "slice_s": slice_s,
            "iterations": a.as_run_iterations} | summary(runs)


def how(figures: dict) -> str:
    """How the rounds ran, in words, for a script's table header"""
    rounds = len(figures["ratio_wall"])
    if not figures["slice_s"]:
        return (f"{rounds} rounds of whole runs by turns, {figures['iterations']} timed "
                f"iterations each")
    pauses = max(r["pauses"] for side in figures["rounds"].values() for r in side)
    return (f"{rounds} rounds, the two time-sliced in turns of {figures['slice_s']:g} s, "
            f"{figures['iterations']} timed iterations each, at most {pauses} of them "
            f"holding a pause")
