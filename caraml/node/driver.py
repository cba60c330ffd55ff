"""The driver core every benchmark's driver shares: from the command line to the exit
status. A benchmark brings its options, its set-up and one training step;
everything a row's figures depend on is defined here once:

- a timed iteration: from the start of one step to the end of the
  decision whether to stop after it, with the step's batch fetched and its
  work done on the device (synchronised); the first `--warmup-iters` are
  run and not timed. What lies between two timed iterations is not timed:
  the progress line every `--log-interval` iterations (a gather over the
  ranks and a print), so the timed iterations add up to less than the wall
  time of the timed phase, and the whole run (set-up, warm-up, the
  summary) takes longer still; time per iteration is the timed
  iterations' own.
- the stop: the iteration count (a floor where a measurement window is
  given: the run goes on until it has timed --min-timed-iterations lasting
  --min-timed-seconds), the wall-clock budget or a signal, taken by all
  ranks after the same iteration, and named once (with the rank that saw a
  signal first). The counts need no agreement; a signal, the budget and a
  window's seconds, which one rank may see before the others, are agreed
  on by a collective about once a second of training (never on one
  process), so all but about one timed iteration a second carry no
  collective of the driver's own;
- the summary: rank 0 prints the stop line, one line per rank and the
  global line; a run without a timed iteration prints what it has, an
  error that says why, and exits EXIT_NO_FIGURE;
- energy: jpwr's methods are checked before the process group exists, and
  each rank measures around the loop with the timed iterations as a window;
- raw evidence: where the run measures energy, rank 0 writes what the
  summary's figures are made from beside the energy files: every timed
  iteration's time on every rank, every loss and skipped update, and what
  one iteration does (caraml/node/iterations.py), and the machine's
  identity (caraml/node/provenance.py);
- peak memory: counted over the timed iterations (reset after the warm-up);
- power limits: every rank records its device's limit and default at the
  start; a sweep's point is set (or checked) before the driver's set-up and
  put back at the first stop signal and when the run ends, however it ends
  (caraml/node/power_limit_run.py); a rank that cannot read or set it fails the
  run on every rank before training;
- exit status: EXIT_INPUT for bad input, on any rank, or out of memory.
"""

from __future__ import annotations

import contextlib
import math
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TypeVar

from caraml import benchmarks, report
from caraml.node import dist as caraml_dist
from caraml.node import energy, iterations, memory, numerics, power_limit_run, provenance
from caraml.node.dist import Dist
from caraml.node.energy import TimedWindow
from caraml.node.options import NO_ENERGY_DIR, DriverOptions, EnergyOptions
from caraml.node.startup import StartupTimeout
from caraml.node.stopping import StopCondition
from caraml.node.timing import IterationTimer, Timed, TimingStats, slowest_per_iteration, summarize
from caraml.report import BenchmarkInputError

EXIT_OK = 0
EXIT_NO_FIGURE = 1  # the run ended before any iteration was timed
EXIT_INPUT = 2  # bad input or out of memory: the error line names it

EnergyMeter = Callable[[int], AbstractContextManager]
T = TypeVar("T")
# a driver's own options
Opts = TypeVar("Opts", bound=DriverOptions)
# (iteration, seconds per iteration of the slowest rank, loss) -> progress line
Progress = Callable[[int, float, float], str]


def energy_meter(opts: EnergyOptions) -> EnergyMeter:
    """rank -> a context that measures that rank's energy. jpwr and the
    method names are checked now, so a missing jpwr or a misspelt method
    stops the run before the model is built."""
    if not opts.measures_energy:
        return lambda rank: contextlib.nullcontext()
    try:
        energy.check_methods(opts.energy_methods)
    except ImportError as e:
        raise BenchmarkInputError(
            f"--energy-methods {' '.join(opts.energy_methods)} needs jpwr and it does not import "
            f"here ({e}); pass --energy-methods none to train without measuring energy") from None
    except ValueError as e:
        raise BenchmarkInputError(f"--energy-methods: {e}") from None
    out_dir = opts.energy_dir
    if out_dir is None:
        raise BenchmarkInputError(NO_ENERGY_DIR)
    return lambda rank: energy.measured(out_dir, rank, opts.energy_methods, opts.energy_interval_ms)


def agreed(dist: Dist, check: Callable[[], T]) -> T:
    """Runs a set-up step on every rank; if it fails on any, every rank
    raises, and only the lowest failing rank's message is printed (by
    main), so a failure shows once and no rank waits for the others."""
    error = None
    try:
        value = check()
    except BenchmarkInputError as e:
        error = str(e)
    failing = [rank for rank, (flag,) in enumerate(dist.gather_floats([float(error is not None)]))
               if flag]
    if failing:
        raise BenchmarkInputError(error if dist.rank == failing[0] else "")
    return value


def stop_reason(reasons_by_rank: Sequence[str | None]) -> str:
    """Why the run stopped, in words: rank 0's own reason, else that of the
    first rank that had one (a signal or a budget seen there first)."""
    rank, reason = next((r, why) for r, why in enumerate(reasons_by_rank) if why is not None)
    return reason if rank == 0 else f"{reason} on rank {rank}"


# How often, in seconds of training, the ranks agree whether one of them
# must stop: a stop then comes within about a second, and the collective
# adds nothing measurable to the timed iterations it falls in.
STOP_CHECK_S = 1.0


@dataclass
class _StopVote:
    """Whether the ranks stop after this iteration, the same answer on all:
    the counts need no word between them; a signal, the budget or a
    window's seconds are agreed on at check points, every `every`
    iterations (every iteration until the warm-up has shown how long one
    takes)."""

    dist: Dist
    stop: StopCondition
    every: int = 1

    def __call__(self, done: int, timed: Timed) -> tuple[str | None, bool]:
        reason = self.stop.reason(done, timed)
        if self.dist.world_size == 1:
            return reason, reason is not None
        if self.stop.count_reached(done, timed):
            return reason, True
        if done % self.every:
            return reason, False
        return reason, self.dist.any_rank(reason is not None)

    def pace(self, seconds_per_iteration: float) -> None:
        """The check points from the warm-up's time per iteration, the
        slowest rank's, so that every rank has the same ones"""
        if self.dist.world_size == 1:
            return
        slowest = max(r[0] for r in self.dist.gather_floats([seconds_per_iteration]))
        self.every = max(1, int(STOP_CHECK_S / slowest)) if slowest > 0 else 1


@dataclass
class LoopResult:
    iterations: int  # all, warm-up included
    durations: list[float]  # this rank's timed iterations; empty: none timed
    nodes: int  # distinct hosts among the ranks
    loss: float  # mean over the last progress interval and all ranks (nan: none)
    stop_reason: str  # the same on every rank
    numerics: dict = field(default_factory=dict)  # the summary line's (caraml/node/numerics.py)
    # this process's CPU time (all its threads, not its loader workers) over
    # the timed window, from the first timed iteration to the loop's end
    # (before the energy scope closes); nan where none was timed
    cpu_s: float = math.nan
    # the share of the busiest host's CPU time other processes used while the
    # loop ran, the same on every rank (None: not measured)
    foreign_cpu_pct: float | None = None
    # where rank 0 writes the raw evidence (None: the run measures no energy and
    # keeps none), and every iteration's loss and each rank's skips (numerics.series)
    evidence_dir: str | None = None
    series: dict = field(default_factory=dict)


@dataclass
class _Interval:
    """Loss and time since the last progress line, on this rank."""

    loss_sum: float = 0.0
    loss_count: int = 0
    seconds: float = 0.0
    iterations: int = 0

    def add(self, loss: float | None, seconds: float) -> None:
        if loss is not None:
            self.loss_sum += float(loss)
            self.loss_count += 1
        self.seconds += seconds
        self.iterations += 1


def _progress(dist: Dist, done: int, interval: _Interval, line: Progress) -> float:
    """Prints the progress line on rank 0; returns the interval's loss."""
    ranks = dist.gather_floats([interval.loss_sum, interval.loss_count,
                                interval.seconds / interval.iterations])
    count = sum(r[1] for r in ranks)
    loss = sum(r[0] for r in ranks) / count if count else math.nan
    if dist.is_main:
        report.write_line(line(done, max(r[2] for r in ranks), loss))
    return loss


def train_loop(step: Callable[[], object], opts: DriverOptions, dist: Dist,
               stop: StopCondition, meter: EnergyMeter, progress: Progress,
               clock: Callable[[], float] = time.perf_counter) -> LoopResult:
    """Runs `step` (one iteration: fetch, forward, backward, update; returns
    this rank's loss or None, or numerics.Stepped where it may skip its
    update) until the stop condition holds on any rank, with energy
    measured around the loop and provenance recorded before it; every
    iteration's loss and skipped update is kept (caraml/node/numerics.py)."""
    hostnames = dist.gather_objects(dist.hostname)
    evidence_dir = opts.energy_dir if opts.measures_energy else None
    provenance.record(dist, evidence_dir, hostnames)
    timer = IterationTimer(opts.warmup_iters, sync=dist.sync, clock=clock)
    interval, loss, done, warmup_s, cpu_at_start = _Interval(), math.nan, 0, 0.0, math.nan
    vote = _StopVote(dist, stop)
    account = numerics.Numerics()
    with meter(dist.rank) as scope:
        window = TimedWindow(scope, dist.sync)
        reason = stop.reason(done)  # a signal may have come during set-up
        stopping = dist.any_rank(reason is not None)
        while not stopping:
            if done == opts.warmup_iters:
                if done:
                    vote.pace(warmup_s / done)
                memory.reset_peak(dist.device)
                window.begin()
                cpu_at_start = time.process_time()
            timer.start()
            step_loss, skipped = numerics.outcome(step())
            done += 1
            account.add(done, step_loss, skipped, timed=done > opts.warmup_iters)
            # a measurement window counts this iteration too, its timer still running
            reason, stopping = vote(done, timer.so_far())
            seconds = timer.stop()
            warmup_s += seconds if done <= opts.warmup_iters else 0.0
            interval.add(step_loss, seconds)
            if stopping or done % opts.log_interval == 0:
                loss = _progress(dist, done, interval, progress)
                interval = _Interval()
        # the timed window's CPU time: not the energy scope's end, which
        # writes its files as it closes
        cpu_s = time.process_time() - cpu_at_start
        window.end()
    foreign = provenance.report_load_at_end(dist, hostnames)
    return LoopResult(done, timer.durations, len(set(hostnames)), loss,
                      stop_reason(dist.gather_objects(reason)), account.fields(dist),
                      cpu_s=cpu_s, foreign_cpu_pct=foreign, evidence_dir=evidence_dir,
                      series=account.series(dist) if evidence_dir else {})


def report_result(dist: Dist, result: LoopResult, *,
                  rank_line: Callable[[list[float]], dict],
                  global_line: Callable[[TimingStats | None], dict],
                  work: Mapping[str, object] | None = None) -> int:
    """Every rank calls this. Rank 0 prints the stop line, each rank's line
    (rank_line of its timed iterations) and the global line (global_line of
    the job's iterations, each as long as its slowest rank's; None where no
    iteration was timed), and keeps the iterations as raw evidence where
    the run keeps any (work: what one iteration does, iterations.record).
    Returns the exit status."""
    timed = bool(result.durations)  # the same on every rank: they stop together
    by_rank = dist.gather_floats(result.durations) if timed else []
    peak_memory = memory.peak(dist)
    if not dist.is_main:
        return EXIT_OK if timed else EXIT_NO_FIGURE
    report.stop(result.stop_reason)
    for rank, durations in enumerate(by_rank):
        report.emit(f"rank {rank}", **rank_line(durations))
    slowest = slowest_per_iteration(by_rank) if timed else []
    job = summarize(slowest) if timed else None
    report.emit("global", **global_line(job), **(job.spread() if job else {}), nodes=result.nodes,
                iterations=len(result.durations),
                iterations_total=result.iterations, loss=result.loss, **result.numerics,
                **peak_memory,
                cpu_s_per_iteration=result.cpu_s / len(result.durations) if timed else "-")
    # after the figures' line: a full disk costs the row its audit, never its figures
    if timed and result.evidence_dir is not None:
        try:
            iterations.record(result.evidence_dir, by_rank=by_rank, slowest=slowest,
                              iterations_total=result.iterations, **result.series, work=work or {})
        except OSError as err:
            report.warning(f"the timed iterations' raw evidence ({iterations.FILE_NAME}) was not written "
                           f"({err.strerror}): the row keeps its figures and reads as unaudited; free "
                           "space in the run folder for the next run")
    if not timed:
        report.error(f"no throughput figure: the run stopped ({result.stop_reason}) after "
                     f"{result.iterations} iteration(s), all of them warm-up")
        return EXIT_NO_FIGURE
    return EXIT_OK


def _release_frames(error: BaseException | None) -> None:
    """A traceback keeps train's frame, and the model in it, alive:
    destroying the process group while DDP's reducer still holds it can
    deadlock gloo (seen with torch 2.13)."""
    while error is not None:
        traceback.clear_frames(error.__traceback__)
        error = error.__context__


Train = Callable[[Opts, Dist, StopCondition, EnergyMeter], int]


def listed_or_checked(opts: Opts, listing: bool, names: Callable[[], Iterable[str]],
                      check: Callable[[Opts], None]) -> Opts | int:
    """A driver's options after its input checks, or 0 where the command
    line only asked for the names it knows (--list-models, --list-problems),
    which are printed one a line."""
    if listing:
        print("\n".join(names()))
        return 0
    check(opts)
    return opts


def main(argv: Sequence[str] | None, parse: Callable[[Sequence[str] | None], Opts | int],
         train: Train[Opts], *, before_init: Callable[[Opts], None] | None = None) -> int:
    """parse(argv) gives the options (or an exit status where the command
    line only asked a question); train(options, dist, stop, meter) runs
    between joining and leaving the process group and returns the status."""
    try:
        opts = parse(argv)
        if isinstance(opts, int):
            return opts
        meter = energy_meter(opts)
        benchmarks.all_benchmarks()  # a site's registry (CARAML_BENCHMARKS) that fails, before training
    except (BenchmarkInputError, benchmarks.UnknownBenchmark) as e:
        report.error(str(e))
        return EXIT_INPUT
    if before_init is not None:
        before_init(opts)
    # From here on a signal ends the run with its summary, and the
    # wall-clock budget counts from here (set-up included), as Megatron-LM's does.
    with StopCondition(max_iterations=opts.train_iters, max_seconds=opts.budget_s,
                       min_timed_iterations=opts.min_timed_iterations,
                       min_timed_seconds=opts.min_timed_seconds) as stop:
        try:
            dist = caraml_dist.init(opts.device, opts.startup_deadline_s)
        except StartupTimeout as e:  # a rank that never came: named, on every rank that did
            report.error(str(e))
            return EXIT_NO_FIGURE
        except (RuntimeError, ValueError) as e:  # e.g. --device cuda without a GPU
            report.error(f"--device {opts.device}: {e}")
            return EXIT_INPUT
        try:
            with contextlib.ExitStack() as held:
                # every rank reads its limit before any sets one (caraml/node/power_limit_run.py)
                agreed(dist, lambda: power_limit_run.record_at_start(opts, dist))
                point = opts.power_limit
                if point is not None:
                    agreed(dist, lambda: held.enter_context(power_limit_run.limited_power(opts, point, dist)))
                return train(opts, dist, stop, meter)
        except BenchmarkInputError as e:
            _release_frames(e)
            if str(e):  # empty: another rank printed it (agreed)
                report.error(str(e))
            return EXIT_INPUT
        except BaseException as e:
            _release_frames(e)
            raise
        finally:
            dist.close()
