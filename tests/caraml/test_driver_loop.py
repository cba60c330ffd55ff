"""The driver core's loop (both benchmarks run it), on a fake clock:
warm-up left out, the batch fetch and the stop decision timed, every way of
stopping, and the progress line."""

import contextlib
import itertools
import math
import os
import signal
import time
from dataclasses import dataclass

import pytest

from caraml.node import driver, numerics
from caraml.node.options import DriverOptions
from caraml.node.stopping import StopCondition
from caraml.node.timing import Timed


@dataclass(frozen=True, kw_only=True)
class Opts(DriverOptions):
    pass


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def steps_taking(clock, seconds):
    """A step that takes seconds[i] on the fake clock and returns i as loss."""
    calls = itertools.count()

    def step():
        i = next(calls)
        clock.now += seconds[i]
        return float(i)

    return step


def no_energy(rank):
    return contextlib.nullcontext()


def progress(done, seconds, loss):
    return f"progress {done}: {seconds:.3f} s, loss {loss:.1f}"


def run(step, clock, dist, stop, warmup=2, log_interval=1000):
    opts = Opts(train_iters=stop.max_iterations, warmup_iters=warmup, log_interval=log_interval,
                energy_methods=("none",))
    return driver.train_loop(step, opts, dist, stop, no_energy, progress, clock=clock)


def test_warmup_iterations_are_run_but_not_timed(single_cpu):
    clock = FakeClock()
    result = run(steps_taking(clock, [5.0, 4.0, 1.0, 2.0, 3.0]), clock, single_cpu,
                 StopCondition(max_iterations=5, clock=clock), warmup=2)
    assert result.iterations == 5
    assert result.durations == [1.0, 2.0, 3.0]
    assert result.loss == 2.0  # the mean of the one progress interval: losses 0 to 4
    assert result.stop_reason == "iteration count 5 reached"


def test_the_cpu_time_covers_the_timed_window_not_the_energy_scopes_close(single_cpu):
    """jpwr's scope writes its files as it closes, after the last timed
    iteration: that CPU time is no iteration's"""
    @contextlib.contextmanager
    def closing_slowly(rank):
        yield None
        start = time.process_time()
        while time.process_time() - start < 0.5:
            pass

    clock = FakeClock()
    opts = Opts(train_iters=3, warmup_iters=1, log_interval=1000, energy_methods=("none",))
    result = driver.train_loop(steps_taking(clock, [1.0] * 3), opts, single_cpu,
                               StopCondition(max_iterations=3, clock=clock), closing_slowly, progress,
                               clock=clock)
    assert result.durations == [1.0, 1.0]
    assert 0 <= result.cpu_s < 0.5


def test_everything_between_two_steps_is_timed(single_cpu):
    """The batch fetch (inside the step) and the stop decision count."""
    clock = FakeClock()
    step = steps_taking(clock, [1.0] * 3)

    class SlowStop(StopCondition):
        def reason(self, done, timed=Timed()):
            clock.now += 0.25  # e.g. a slow clock read or signal check
            return super().reason(done, timed)

    result = run(step, clock, single_cpu, SlowStop(max_iterations=3, clock=clock), warmup=0)
    assert result.durations == [1.25, 1.25, 1.25]


def test_a_measurement_window_runs_past_the_iteration_count_until_it_is_long_enough(single_cpu):
    """The window counts the running iteration too: it closes at the
    iteration that reaches it, never before."""
    clock = FakeClock()
    step = steps_taking(clock, [1.0] * 100)
    stop = StopCondition(max_iterations=3, min_timed_iterations=2, min_timed_seconds=5.0, clock=clock)
    result = run(step, clock, single_cpu, stop, warmup=1)
    assert result.durations == [1.0] * 5 and result.iterations == 6
    assert result.stop_reason == "measurement window reached: at least 2 timed iterations lasting 5 s"


def test_a_signal_stops_the_loop_after_the_running_iteration(single_cpu):
    clock = FakeClock()
    step = steps_taking(clock, [1.0] * 100)

    def signalled_in_third():
        loss = step()
        if loss == 2:
            os.kill(os.getpid(), signal.SIGUSR1)
        return loss

    with StopCondition(max_iterations=100, clock=clock) as stop:
        result = run(signalled_in_third, clock, single_cpu, stop, warmup=1)
    assert result.iterations == 3
    assert result.durations == [1.0, 1.0]
    assert result.stop_reason == "signal SIGUSR1"


def test_the_wall_clock_budget_stops_the_loop(single_cpu):
    clock = FakeClock()
    stop = StopCondition(max_iterations=100, max_seconds=10.0, clock=clock)
    result = run(steps_taking(clock, [4.0] * 100), clock, single_cpu, stop, warmup=1)
    assert result.iterations == 3  # 12 s >= 10 s after the third
    assert result.stop_reason == "wall-clock budget 10 s reached"


@pytest.mark.parametrize("reasons, text", [
    (["signal SIGTERM", "signal SIGTERM"], "signal SIGTERM"),
    (["iteration count 5 reached"], "iteration count 5 reached"),
    ([None, None, "signal SIGUSR1", "wall-clock budget 60 s reached"],
     "signal SIGUSR1 on rank 2"),
])
def test_the_stop_reason_is_rank_0s_or_that_of_the_rank_that_stopped_first(reasons, text):
    assert driver.stop_reason(reasons) == text


def test_stopped_before_the_first_iteration(single_cpu):
    clock = FakeClock()
    stop = StopCondition(max_iterations=5, clock=clock)
    stop.signal_received = "SIGTERM"
    result = run(steps_taking(clock, [1.0] * 5), clock, single_cpu, stop)
    assert (result.iterations, result.durations) == (0, [])
    assert math.isnan(result.loss)
    assert result.stop_reason == "signal SIGTERM"


def test_progress_lines_give_the_intervals_time_and_loss(single_cpu, capsys):
    clock = FakeClock()
    run(steps_taking(clock, [5.0, 4.0, 1.0, 2.0, 3.0]), clock, single_cpu,
        StopCondition(max_iterations=5, clock=clock), warmup=2, log_interval=2)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("progress")]
    # every second iteration, and at the stop (iteration 5)
    assert lines == ["progress 2: 4.500 s, loss 0.5", "progress 4: 1.500 s, loss 2.5",
                     "progress 5: 3.000 s, loss 4.0"]


class OneOfTwoRanks:
    """Rank 0's view of a two-rank job whose other rank sees no stop of its
    own and takes twice as long per iteration; it counts the collectives"""

    world_size, rank = 2, 0

    def __init__(self):
        self.votes = 0

    def any_rank(self, flag):
        self.votes += 1
        return flag

    def gather_floats(self, values):
        return [values, [2 * v for v in values]]


class OneRank:
    world_size, rank = 1, 0

    def any_rank(self, flag):
        raise AssertionError("no collective on one process")

    gather_floats = any_rank


def test_ranks_agree_on_a_stop_about_once_a_second_from_the_slowest_ranks_pace():
    dist = OneOfTwoRanks()
    stop = StopCondition(max_iterations=1000)
    vote = driver._StopVote(dist, stop)
    vote.pace(0.1)  # the other rank's 0.2 s: a check point every 5 iterations
    assert vote.every == 5
    decisions = [vote(done, Timed())[1] for done in range(1, 21)]
    assert not any(decisions) and dist.votes == 4  # after iterations 5, 10, 15 and 20
    stop.signal_received = "SIGUSR1"
    assert [vote(done, Timed())[1] for done in (21, 22, 23, 24, 25)] == [False] * 4 + [True]
    assert vote(25, Timed())[0] == "signal SIGUSR1"


def test_the_iteration_count_stops_every_rank_without_a_collective():
    dist = OneOfTwoRanks()
    vote = driver._StopVote(dist, StopCondition(max_iterations=12))
    vote.pace(0.1)
    assert [vote(done, Timed())[1] for done in (11, 12)] == [False, True]
    assert dist.votes == 0


def test_one_process_decides_every_iteration_without_a_collective():
    stop = StopCondition(max_iterations=1000)
    vote = driver._StopVote(OneRank(), stop)
    vote.pace(0.001)
    assert vote(1, Timed()) == (None, False)
    stop.signal_received = "SIGTERM"
    assert vote(2, Timed()) == ("signal SIGTERM", True)


def test_a_window_of_timed_iterations_closes_on_every_rank_without_a_collective():
    dist = OneOfTwoRanks()
    vote = driver._StopVote(dist, StopCondition(max_iterations=4, min_timed_iterations=6))
    vote.pace(0.1)  # check points every 5 iterations: none falls on 4, 6 or 7
    assert vote(4, Timed(3, 0.3)) == (None, False)
    assert vote(6, Timed(5, 0.5)) == (None, False)
    assert vote(7, Timed(6, 0.6))[1] is True
    assert dist.votes == 0


def test_a_windows_seconds_are_agreed_on_at_the_next_check_point():
    """Each rank times its own iterations, so one may reach the window's
    seconds first: it stops only with the others, at a check point."""
    dist = OneOfTwoRanks()
    vote = driver._StopVote(dist, StopCondition(max_iterations=4, min_timed_seconds=2.0))
    vote.pace(0.1)  # a check point every 5 iterations
    reason, stopping = vote(6, Timed(5, 2.5))
    assert reason.startswith("measurement window reached") and not stopping
    assert dist.votes == 0
    assert vote(10, Timed(9, 4.5)) == (reason, True) and dist.votes == 1


def test_every_loss_and_skipped_update_is_kept_for_the_summary_line(single_cpu):
    """The first iteration's loss, the first that is not finite with its
    iteration (counted from 1), and the timed updates a scaler skipped
    (a skip in the warm-up is the scaler finding its scale)."""
    clock = FakeClock()
    outcomes = iter([numerics.Stepped(9.0, True), numerics.Stepped(8.0, False),
                     numerics.Stepped(math.inf, True), numerics.Stepped(math.nan, True), 7.0])

    def step():
        clock.now += 1.0
        return next(outcomes)

    result = run(step, clock, single_cpu, StopCondition(max_iterations=5, clock=clock), warmup=1)
    assert result.numerics == {"loss_first": 9.0, "loss_nonfinite": math.inf, "loss_nonfinite_at": 3,
                               "skipped_iterations": 2}


def test_a_run_of_finite_losses_names_no_loss_that_is_not(single_cpu):
    clock = FakeClock()
    result = run(steps_taking(clock, [1.0] * 4), clock, single_cpu,
                 StopCondition(max_iterations=4, clock=clock), warmup=1)
    assert result.numerics == {"loss_first": 0.0, "skipped_iterations": 0}
