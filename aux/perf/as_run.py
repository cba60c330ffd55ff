"""A benchmark as it runs, against a plain loop over the same network,
optimizer and batches. The suite's side is its driver started as JUBE
starts it (`python -m <driver>` with the job's arguments: its data source,
loop, timing, stop condition and jpwr); the plain side is a loop of a few
lines in a process of its own (the peer script with `--plain`), which
takes its batches from memory and times its iterations the way the
driver does (the device synchronised before each clock read). The two run
by turns, the order swapped every round, with the same environment, so a
clock change or another job on the host hits both alike.

Each run gives the figure its row reports, the mean time per timed
iteration (work over the timed window), with the median beside it, and
its process's CPU time per timed iteration over the timed window (all
its threads, not a loader's worker processes). A round's ratios are the
plain loop's over the suite's (above 1: the suite is faster), by the mean,
by the median and by CPU time; each is summarised as the median over the
rounds with its 95 % interval, from the seeded bootstrap caraml-compare
uses for repeats (caraml/compare/repeats.py), drawing whole rounds so that
each keeps its pair. Beside them, the fastest runs' ratio: interference
only ever adds time, so each side's fastest run is its least disturbed.
Every round records the host's load: the load average as it began and
ended, and the share of the host's CPU time that went to other processes
while it ran.

On a CPU host the two sides run time-sliced by default (`--as-run-slice`):
both processes are started, and from the moment both have set up they
take turns of a few seconds until both have ended, one always stopped
(SIGSTOP, its whole process group) while the other runs. A host whose
speed drifts over tens of seconds (a virtual machine beside others) then
slows both sides alike within each pair of turns, as it cannot between
whole runs a minute apart. A side gives up its turn itself, between two
iterations (aux/perf/turns.py), so no timed iteration holds the other
side's turn; one that overruns its turn twice over is stopped where it
is. A round is refused, and says why, where a side was stopped inside a
timed iteration, or one of its timed iterations lasted longer than a turn
(turns then no longer pair the two sides' iterations); refused rounds do
not count, and a run with more of them than `--as-run-refusals` stops and
says it cannot conclude. On a GPU the runs go whole by turns
(`--as-run-slice 0`): two processes would hold the device's memory at
once, and work queued before a pause would run in the other's turn."""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import turns  # noqa: E402

from caraml.compare import repeats  # noqa: E402

PLAIN_LINE = "as-run plain:"
TURNS_SCRIPT = Path(turns.__file__).resolve()
RUN_TIMEOUT_S = 3600
STOPPED_WITHIN_S = 10.0  # a stopped process group's threads have all stopped
# a side that has not given up its turn after this many turns' time is
# stopped where it is (inside an iteration, most likely: the round is refused)
OVERRUN_TURNS = 2.0
POLL_S = 0.001  # how often the end of a turn is looked for
SETUP_POLL_S = 0.01  # ... and the end of a side's set-up
EXIT_INCONCLUSIVE = 3  # a peer script's status where its rounds cannot conclude


@dataclass(frozen=True)
class Run:
    mean_s: float  # mean time per timed iteration: work over the timed window, the row's figure
    median_s: float  # median time per timed iteration
    cpu_s: float  # process CPU time per timed iteration, over the timed window
    yields: int = 0  # turns it gave up (time-sliced)
    forced: int = 0  # turns it overran, and was stopped where it was
    stopped_inside: int = 0  # timed iterations inside which it was stopped
    longest_s: float | None = None  # its longest timed iteration (time-sliced)


@dataclass(frozen=True)
class Round:
    """A round's two runs (the suite's and the plain loop's, or the first
    and second side's), why it does not count (empty: it counts) and the
    host's load while it ran"""

    runs: tuple[Run, Run]
    refused: tuple[str, ...] = ()
    load: dict = field(default_factory=dict)

    def record(self) -> dict:
        return {"suite": asdict(self.runs[0]), "plain": asdict(self.runs[1]),
                "refused": list(self.refused), "load": self.load}


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
    names = ("time_per_iteration_s", "time_per_iteration_median_s", "cpu_s_per_iteration")
    if fields is None or any(fields.get(name) in (None, "-") for name in names):
        raise RunFailed("the driver printed no timed figure")
    return Run(*(float(fields[name]) for name in names))


def plain_figures(out: str) -> Run:
    line = next((line for line in reversed(out.splitlines()) if line.startswith(PLAIN_LINE)),
                None)
    if line is None:
        raise RunFailed("the plain loop printed no timed figure")
    return Run(**json.loads(line[len(PLAIN_LINE):]))


def turns_of(out: str) -> tuple[int, list[tuple[float, float]]]:
    """A time-sliced side's turns given up and timed iterations' spans"""
    line = next((line for line in reversed(out.splitlines()) if line.startswith(turns.TURNS_LINE)),
                None)
    if line is None:
        raise RunFailed("a side printed no account of its turns (aux/perf/turns.py)")
    found = json.loads(line[len(turns.TURNS_LINE):])
    return found["yields"], [tuple(span) for span in found["spans"]]


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
    `iterations` timed ones, giving up its turn between two of them where
    it runs time-sliced; printed for plain_run to read."""
    sliced = turns.Turns.from_env()
    for _ in range(warmup):
        sliced.boundary()
        step()
    sync()
    times, cpu0 = [], time.process_time()
    for _ in range(iterations):
        sliced.boundary()
        begun = time.monotonic()
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
        sliced.timed(begun, time.monotonic())
    run = Run(statistics.fmean(times), statistics.median(times),
              (time.process_time() - cpu0) / iterations)
    print(PLAIN_LINE + json.dumps(asdict(run)), flush=True)
    if sliced.turn_s is not None:
        sliced.report()
    return run


def by_turns(suite: Callable[[], Run], plain: Callable[[], Run]) -> Callable[[bool], Round]:
    """A round of whole runs, one after the other"""

    def one_round(suite_first: bool) -> Round:
        if suite_first:
            s = suite()
            return Round((s, plain()))
        p = plain()
        return Round((suite(), p))

    return one_round


class HostLoad:
    """How busy the host was while a round ran, beside the round's own
    processes: the load average as it began and ended, and the share of
    the host's CPU time (all CPUs, /proc/stat: steal included) that went
    neither to the round's sides (this process's children, their own
    children included once waited for) nor to this process"""

    def __init__(self) -> None:
        self._start = self._now()

    @staticmethod
    def _now() -> tuple:
        from caraml.node.provenance import host_cpu_ticks  # imports torch: only where a round runs

        own = sum(getattr(resource.getrusage(who), f) for who in
                  (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN) for f in ("ru_utime", "ru_stime"))
        return host_cpu_ticks(), own, os.getloadavg()[0]

    def end(self) -> dict:
        (ticks0, own0, load0), (ticks1, own1, load1) = self._start, self._now()
        others = None
        if ticks0 is not None and ticks1 is not None and ticks1[1] > ticks0[1]:
            hz = os.sysconf("SC_CLK_TCK")
            busy_s, total_s = (ticks1[0] - ticks0[0]) / hz, (ticks1[1] - ticks0[1]) / hz
            others = round(min(100.0, max(0.0, 100 * (busy_s - (own1 - own0)) / total_s)), 1)
        return {"load_1min": [round(load0, 2), round(load1, 2)], "others_cpu_pct": others}


def interleaved(rounds: int, one_round: Callable[[bool], Round], refusals: int | None = None,
                say: Callable[[str], None] = print,
                names: tuple[str, str] = ("suite", "plain")) -> list[Round]:
    """Rounds until `rounds` of them count (the first side first in every
    other one), or until more than `refusals` have been refused (default:
    a quarter of `rounds`, at least 1); each with the host's load"""
    allowed = max(1, rounds // 4) if refusals is None else refusals
    done: list[Round] = []
    while sum(not r.refused for r in done) < rounds:
        load = HostLoad()
        this = one_round(len(done) % 2 == 0)
        done.append(replace(this, load=load.end()))
        s, p = this.runs
        counted = sum(not r.refused for r in done)
        say(f"# round {len(done)} ({counted}/{rounds} counted): {names[0]} {s.mean_s:.5f} s, "
            f"{names[1]} {p.mean_s:.5f} s per iteration (mean), load {done[-1].load['load_1min'][1]:.2f}"
            + (f"; refused: {'; '.join(this.refused)}" if this.refused else ""))
        if len(done) - counted > allowed:
            say(f"# {inconclusive(done, rounds)}")
            break
    return done


def inconclusive(done: list[Round], rounds: int) -> str | None:
    """Why the rounds cannot conclude (None: they can): fewer counted
    than were asked for, more refused than allowed"""
    counted = sum(not r.refused for r in done)
    if counted >= rounds:
        return None
    return (f"cannot conclude: {len(done) - counted} of {len(done)} rounds refused, "
            f"{counted} of {rounds} counted; this host stops or slows the sides inside their "
            f"iterations: run it on a quieter host, or with longer turns (--as-run-slice)")


def _die_with_parent() -> None:
    """In a side's process before it starts: killed with the comparison,
    so that no paused side outlives it (PR_SET_PDEATHSIG)"""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def _state(pid: int) -> str:
    """A process's (its main thread's) state letter; "" where it is gone"""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


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
    output as it comes, and the stops it was given rather than took"""

    def __init__(self, cmd: Sequence[str], env: dict[str, str], what: str, cwd: Path):
        self.what = what
        self.lines: list[str] = []
        self.forced: list[list[float]] = []  # [stopped, continued] on the monotonic clock
        self.proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                     preexec_fn=_die_with_parent)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def running(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass  # the group has ended

    def stopped_itself(self) -> bool:
        return _state(self.proc.pid) in ("T", "t")

    def hold(self, deadline: float) -> None:
        """Stops the group (where it has not stopped itself) and waits
        until all its threads have"""
        self.signal(signal.SIGSTOP)
        while not _stopped(self.proc.pid):
            if time.monotonic() > deadline:
                raise RunFailed(f"{self.what} did not stop within {STOPPED_WITHIN_S:.0f} s of SIGSTOP")
            time.sleep(0.001)

    def force(self) -> None:
        """Stops a side that overran its turn, where it is"""
        self.forced.append([time.monotonic(), math.inf])
        self.hold(time.monotonic() + STOPPED_WITHIN_S)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        if self.forced and self.forced[-1][1] == math.inf:
            self.forced[-1][1] = time.monotonic()

    def check(self) -> None:
        if self.proc.returncode not in (None, 0):
            self.reader.join(timeout=5)
            raise _failed(self.what, self.proc.returncode, "".join(self.lines))

    def output(self) -> str:
        self.reader.join(timeout=5)
        return "".join(self.lines)

    def set_up(self, end: float, deadline_s: float) -> None:
        """Waits until the side has stopped itself at its first iteration"""
        while not self.stopped_itself():
            if not self.running():
                self.check()
                raise RunFailed(f"{self.what} ended before its loop")
            if time.monotonic() > end:
                raise RunFailed(f"{self.what} did not reach its loop within {deadline_s:.0f} s")
            time.sleep(SETUP_POLL_S)
        self.hold(time.monotonic() + STOPPED_WITHIN_S)

    def run(self, figures: Callable[[str], Run]) -> Run:
        """The side's figures, with its turns: how many it gave up and
        overran, the timed iterations inside which it was stopped, the
        longest"""
        out = self.output()
        yields, spans = turns_of(out)
        inside = sum(1 for begun, ended in spans
                     if any(begun < resumed and stopped < ended for stopped, resumed in self.forced))
        return replace(figures(out), yields=yields, forced=len(self.forced), stopped_inside=inside,
                       longest_s=max((ended - begun for begun, ended in spans), default=None))


# a side's kind: how its command is started time-sliced, how its figures
# are read, its name
KINDS: dict[str, tuple[Callable[[Sequence[str]], list[str]], Callable[[str], Run],
                       Callable[[Sequence[str]], str]]] = {
    "driver": (lambda cmd: [cmd[0], str(TURNS_SCRIPT), *cmd[1:]], driver_figures,
               lambda cmd: f"the driver ({cmd[2]})"),
    "plain": (list, plain_figures, lambda cmd: "the plain loop"),
}


def refused_because(names: Sequence[str], runs: Sequence[Run], turn_s: float) -> tuple[str, ...]:
    """Why a time-sliced round does not count: a side stopped inside a
    timed iteration, or a timed iteration longer than a turn"""
    reasons = []
    for name, run in zip(names, runs):
        if run.stopped_inside:
            reasons.append(f"{name} was stopped inside {run.stopped_inside} of its timed "
                           f"iterations (it overran its turn)")
        if run.longest_s is not None and run.longest_s > turn_s:
            reasons.append(f"a timed iteration of {name} took {run.longest_s:.3g} s, longer than "
                           f"a turn ({turn_s:g} s)")
    return tuple(reasons)


def time_sliced(suite_cmd: Sequence[str], plain_cmd: Sequence[str], env: dict[str, str],
                slice_s: float, suite_first: bool, deadline_s: float = RUN_TIMEOUT_S,
                kinds: tuple[str, str] = ("driver", "plain"),
                cwds: tuple[Path, Path] = (ROOT, ROOT)) -> Round:
    """One round with both sides alive, taking turns of `slice_s` seconds
    from the moment both have set up until both have ended; the side whose
    turn comes first alternates with `suite_first`. `kinds` name what each
    side is and `cwds` where each starts (a side against itself, or the
    checkout at another commit, for aux/perf/as_run_self.py)."""
    end = time.monotonic() + deadline_s
    started, figures, names = zip(*(KINDS[kind] for kind in kinds))  # before any process starts
    env = env | {turns.TURN_ENV: repr(slice_s)}
    sides: list[_Side] = []
    try:
        for cmd, start, name, cwd in zip((suite_cmd, plain_cmd), started, names, cwds):
            sides.append(_Side(start(cmd), env, name(cmd), cwd))
        for side in sides:
            side.set_up(end, deadline_s)
        order = sides if suite_first else sides[::-1]
        while any(side.running() for side in sides):
            for side in order:
                if side.running():
                    _turn(side, [o for o in sides if o is not side][0], slice_s, end, deadline_s)
                side.check()
        runs = tuple(side.run(read) for side, read in zip(sides, figures))
        return Round(runs, refused_because([side.what for side in sides], runs, slice_s))
    finally:
        for side in sides:
            side.signal(signal.SIGKILL)
            side.proc.wait()


def _turn(side: _Side, other: _Side, slice_s: float, end: float, deadline_s: float) -> None:
    """`side` runs until it gives up its turn or ends; stopped where it is
    once it overran its turn, unless the other has ended"""
    side.resume()
    begun = time.monotonic()
    try:  # it gives up its turn only after `slice_s`
        side.proc.wait(timeout=max(0.0, min(slice_s, end - begun)))
        return
    except subprocess.TimeoutExpired:
        pass
    while side.running():
        if side.stopped_itself():
            side.hold(time.monotonic() + STOPPED_WITHIN_S)
            return
        now = time.monotonic()
        if now > end:
            raise RunFailed(f"{side.what} did not end within {deadline_s:.0f} s")
        if now - begun > OVERRUN_TURNS * slice_s and other.running():
            side.force()
            return
        time.sleep(POLL_S)


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


def summary(done: Sequence[Round]) -> dict:
    """Over the rounds that count: per round the plain loop's time over
    the suite's, by the mean (the row's figure), by the median and by CPU
    time; the median of each over the rounds with its 95 % interval, the
    best round and the fastest runs' ratio. Every round run, refused or
    not, is in `rounds`."""
    counted = [r.runs for r in done if not r.refused]
    suite, plain = [s for s, _ in counted], [p for _, p in counted]
    ratios = {kind: [getattr(p, attr) / getattr(s, attr) for s, p in counted]
              for kind, attr in (("wall", "mean_s"), ("wall_by_median", "median_s"), ("cpu", "cpu_s"))}
    loads = [r.load for r in done if r.load]
    others = [x["others_cpu_pct"] for x in loads if x.get("others_cpu_pct") is not None]
    return {
        "rounds": [r.record() for r in done], "refused": sum(bool(r.refused) for r in done),
        **{f"ratio_{kind}": v for kind, v in ratios.items()},
        **{f"ratio_{kind}_median": statistics.median(v) for kind, v in ratios.items()},
        **{f"ratio_{kind}_median_ci95": median_interval(v) for kind, v in ratios.items()},
        "ratio_wall_best": max(ratios["wall"]),
        "ratio_wall_fastest": min(r.mean_s for r in plain) / min(r.mean_s for r in suite),
        "suite_mean_s": statistics.median(r.mean_s for r in suite),
        "plain_mean_s": statistics.median(r.mean_s for r in plain),
        "suite_median_s": statistics.median(r.median_s for r in suite),
        "plain_median_s": statistics.median(r.median_s for r in plain),
        "suite_cpu_s": statistics.median(r.cpu_s for r in suite),
        "plain_cpu_s": statistics.median(r.cpu_s for r in plain),
        "load_1min": [min(x["load_1min"][0] for x in loads), max(x["load_1min"][1] for x in loads)]
        if loads else None,
        "others_cpu_pct": [min(others), max(others)] if others else None,
    }


COLUMNS = ["as run", "suite s/iteration (mean)", "plain s/iteration (mean)",
           "plain / suite by the mean, median of rounds", "95 % interval",
           "plain / suite by the iteration median", "95 % interval", "fastest runs",
           "suite CPU s/iteration", "plain CPU s/iteration", "plain / suite (CPU)", "95 % interval"]


def interval_text(bounds: Sequence[float]) -> str:
    return "{:.3f}-{:.3f}".format(*bounds)


def row(name: str, s: dict) -> list[str]:
    return [name, f"{s['suite_mean_s']:.4f}", f"{s['plain_mean_s']:.4f}",
            f"{s['ratio_wall_median']:.3f}x", interval_text(s["ratio_wall_median_ci95"]),
            f"{s['ratio_wall_by_median_median']:.3f}x", interval_text(s["ratio_wall_by_median_median_ci95"]),
            f"{s['ratio_wall_fastest']:.3f}x", f"{s['suite_cpu_s']:.4f}", f"{s['plain_cpu_s']:.4f}",
            f"{s['ratio_cpu_median']:.3f}x", interval_text(s["ratio_cpu_median_ci95"])]


def add_arguments(p: argparse.ArgumentParser, warmup: int, iterations: int = 20,
                  slice_s: float = 4.0, rounds: int = 8) -> None:
    """The options every peer script takes: rounds and warm-up of the step
    alone, the as-run comparison's rounds (a benchmark whose rounds take
    seconds asks for more, so that the median's interval resolves 2 %),
    iterations (a benchmark whose iterations take milliseconds asks for
    more, so that a run spans many turns), turns (`slice_s` on a CPU: a
    few dozen of its iterations, so that the longest of them still fits a
    turn on a busy host) and refusals, and the worker mode."""
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=warmup, help="untimed rounds (step alone) or steps (as run)")
    p.add_argument("--as-run-iterations", type=int, default=iterations,
                   help="timed iterations of each run of the driver and of the plain loop")
    p.add_argument("--as-run-rounds", type=int, default=rounds,
                   help="runs of the driver and of the plain loop that count, each (0: the step alone)")
    p.add_argument("--as-run-slice", type=float, default=None,
                   help=f"seconds of each turn when both run time-sliced; 0: whole runs by turns "
                        f"(default: {slice_s:g} on a CPU, 0 on a GPU)")
    p.add_argument("--as-run-refusals", type=int, default=None,
                   help="refused rounds after which the comparison stops, inconclusive "
                        "(default: a quarter of --as-run-rounds, at least 1)")
    p.set_defaults(as_run_cpu_slice=slice_s)
    p.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)


def compare(a: argparse.Namespace, device: str, driver_args: Sequence[str], script: Path,
            plain_args: Sequence[str], env: dict[str, str]) -> dict:
    """The as-run comparison the options ask for: the driver (`python
    driver_args`) against the script's plain loop (`script --plain
    plain_args`), time-sliced or in whole runs by turns. Where too many
    rounds were refused, `inconclusive` says so and no ratio is given."""
    slice_s = a.as_run_slice if a.as_run_slice is not None else (
        a.as_run_cpu_slice if device == "cpu" else 0.0)
    suite_cmd = [sys.executable, *driver_args]
    plain_cmd = [sys.executable, str(script), "--plain", *plain_args]
    if slice_s > 0:
        def one_round(suite_first: bool) -> Round:
            return time_sliced(suite_cmd, plain_cmd, env, slice_s, suite_first)
    else:
        one_round = by_turns(lambda: suite_run(driver_args, env),
                             lambda: plain_run(script, plain_args, env))
    done = interleaved(a.as_run_rounds, one_round, a.as_run_refusals)
    figures = {"driver_args": list(driver_args), "slice_s": slice_s,
               "iterations": a.as_run_iterations, "rounds_asked": a.as_run_rounds,
               "inconclusive": inconclusive(done, a.as_run_rounds)}
    if figures["inconclusive"]:
        return figures | {"rounds": [r.record() for r in done],
                          "refused": sum(bool(r.refused) for r in done)}
    return figures | summary(done)


def how(figures: dict) -> str:
    """How the rounds ran, in words, for a script's table header"""
    done = figures["rounds"]
    load = ""
    if figures.get("load_1min"):
        load = ", load average {:.2f}-{:.2f}".format(*figures["load_1min"])
    if figures.get("others_cpu_pct"):
        load += ", other processes {:.1f}-{:.1f} % of the host's CPU time".format(
            *figures["others_cpu_pct"])
    refused = f" ({figures['refused']} more refused)" if figures["refused"] else ""
    counted = len(done) - figures["refused"]
    rounds = f"{counted} round{'s' if counted != 1 else ''}"
    if not figures["slice_s"]:
        return (f"{rounds} of whole runs by turns, {figures['iterations']} timed "
                f"iterations each{load}")
    return (f"{rounds}{refused}, the two time-sliced in turns of {figures['slice_s']:g} s, "
            f"{figures['iterations']} timed iterations each, none stopped inside one{load}")


def report(title: str, name: str, figures: dict,
           print_table: Callable[[list[str], list[list[str]]], None]) -> int:
    """A peer script's as-run result: its header line and table row, or
    why it cannot conclude; the script's exit status"""
    if figures["inconclusive"]:
        print(f"{title}: {figures['inconclusive']}")
        return EXIT_INCONCLUSIVE
    print(f"{title}, {how(figures)}")
    print_table(COLUMNS, [row(name, figures)])
    return 0
